"""prepare.py: fetch, verify and cache a profile's pinned resources, or pin a new profile (--pin)."""

from pathlib import Path

from sst2_audit.cli.common import EXIT_CODES, lock_and_profile, numeric_mode, Parser, spec_for_run, with_profile
from sst2_audit.formats.lock import load_lock
from sst2_audit.formats.manifest import cache_for, disk_use, NOT_FETCHED, prepare_target, read_manifest, require_folder
from sst2_audit.protocol.rules import notice_for
from sst2_audit.resources import lm_eval_files, prepare
from sst2_audit.resources.pin import pin
from sst2_audit.resources.pin_group import parse_subtasks, pin_group
from sst2_audit.resources.sources.local import PLACEHOLDER
from sst2_audit.task.group import group_spec
from sst2_audit.util import atomic
from sst2_audit.util.commands import command_line
from sst2_audit.util.console import QUIET_ENVIRONMENT
from sst2_audit.util.errors import InternalError


def main(argv) -> int:
    import os


    # our own progress lines only: no third-party progress bars or notices (the GGUF converter's bar,
    # transformers' tokenizer notice); their errors still reach the terminal
    os.environ.update(QUIET_ENVIRONMENT)

    parser = _parser()
    args = parser.parse_args(argv)
    if args.pin is not None and args.pin_group is not None:
        parser.error("--pin pins one profile, --pin-group a group of them; give one")
    if args.lm_eval_rows is not None and args.lm_eval_files is None:
        parser.error("--lm-eval-rows goes with --lm-eval-files")
    if args.lm_eval_files is not None and (args.pin or args.pin_group or args.group or args.all or args.verify):
        parser.error("--lm-eval-files writes one profile's files: give it with --profile alone")
    if args.pin is not None:
        return _pin(args, parser)
    if args.pin_group is not None:
        return _pin_group(args, parser)
    if args.group is not None:
        return _group(args)
    if args.all:
        lock = load_lock(args.lock)
        numeric_mode(lock)
        return max(_prepare_one(args, lock, lock.profile(name)) for name in sorted(lock.profiles))
    lock, profile = lock_and_profile(args)
    code = _prepare_one(args, lock, profile)
    if args.lm_eval_files is not None:
        target = prepare_target(args.cache, profile.name)
        command = lm_eval_files.write(lock, profile, spec_for_run(lock, profile, None), target, target,
                                      args.lm_eval_files, args.lm_eval_rows, "lm-eval-out")
        print(f"lm-eval files: {args.lm_eval_files} (the task YAML and the rows); run lm_eval in this folder, "
              "then adopt lm-eval-out:")
        print(command.line())
    return code


def _prepare_one(args, lock, profile) -> int:
    """One profile into the cache: at its top when that holds no other profile, else in <cache>/<profile>."""
    spec = spec_for_run(lock, profile, None)  # the lock's data must fit the task before anything is fetched
    cache = prepare_target(args.cache, profile.name)
    if args.verify:
        manifest = prepare.verify(lock, profile, cache_for(args.cache, profile.name))
        print(f"verified: {len(manifest.files)} files in {cache} match the manifest and {args.lock.name}")
        return 0
    require_folder(args.cache)  # a file: the words every command uses for it
    atomic.require_writable_folder(args.cache, "--cache")  # before the download and the conversion
    manifest, action = prepare.prepare(lock, profile, cache, args.import_dir, spec.eval_split, not args.no_weights)
    if args.update_lock:
        prepare.update_lock(lock, profile, cache, manifest)
        rewritten = read_manifest(cache)  # rewritten by update_lock; its files were just verified
        if rewritten is None:
            raise InternalError(f"{cache}: update_lock left no manifest")
        manifest = rewritten

    label = f"profile {profile.name}" + (f" ({notice_for(profile)})" if profile.demo else "")
    left_out = sum(entry.source == NOT_FETCHED for entry in manifest.files)
    print(f"{action}: {cache} holds {len(manifest.files) - left_out} verified files for the {label}; "
          f"lock fully hashed: {'yes' if manifest.lock_fully_hashed else 'no'}")
    if left_out:
        print(f"no weights: the model's {left_out} weight file(s) are "
              "pinned, not fetched (--no-weights); adopt and audit run every level but the rescore with this cache "
              "(exit 4 at best), run refuses it")
    profiles, on_disk, as_copies = disk_use(args.cache)
    if len(profiles) > 1:
        print(f"cache {args.cache}: {len(profiles)} profiles ({', '.join(profiles)}), {on_disk / 1e6:.1f} MB on disk "
              f"(model files shared by hard link; {as_copies / 1e6:.1f} MB as copies)")
    return 0


def _parser() -> Parser:
    parser = Parser(prog="sst2-audit prepare", description="Fetch, verify and cache the pinned resources.", epilog=(
        "profiles of the shipped lock: embedded (offline demo, SST-2-shaped), embedded-rte, embedded-inverse-scaling, "
        "glue-sst2 (needs the hub)\n\nexamples:\n  sst2-audit prepare --profile embedded\n"
        "  sst2-audit prepare --pin mine --task rte --model my-model/ --data my-data/ --new-lock locks/mine.lock.json\n"
        "  sst2-audit prepare --lock locks/mine.lock.json --profile mine --cache cache-mine\n\n" + EXIT_CODES))
    with_profile(parser)
    parser.add_argument("--from", dest="import_dir", type=Path, help="import files copied from a connected machine")
    parser.add_argument("--verify", action="store_true", help="only re-hash the cache against manifest and lock")
    parser.add_argument("--lm-eval-files", type=Path, metavar="DIR",
                        help="after preparing, write DIR/<task>.yaml and DIR/samples.json for a plain lm_eval run that "
                             "adopt takes bit for bit, and print the exact lm_eval command (run it in this folder)")
    parser.add_argument("--lm-eval-rows", type=int, metavar="N",
                        help="--lm-eval-files: the profile's first N dev rows (default: all its dev rows)")
    parser.add_argument("--all", action="store_true", help="prepare every profile of the lock into the one cache (the "
                        "first at its top, the others in <cache>/<profile>; shared model files linked once)")
    parser.add_argument("--no-weights", action="store_true",
                        help="fetch the data, tokenizer and config but not the model's weights (a model too large for "
                             "this machine): adopt and audit then run every level but the rescore (exit 4 at best)")
    parser.add_argument("--update-lock", action="store_true",
                        help="fill the lock's unknown sha256s after a verified download")
    parser.add_argument("--pin", metavar="PROFILE",
                        help="write a NEW lock (--new-lock) = --lock + this profile, pinning --model DIR and "
                             "--data DIR|FILE for --task")
    parser.add_argument("--model", type=Path,
                        help="with --pin: a local Hugging Face causal LM folder (safetensors), hub:ORG/NAME@REV, "
                             "or model:NAME to share an entry of the lock's models")
    parser.add_argument("--data", type=Path, help="with --pin: a folder of <split>.parquet|.jsonl|.csv, or one file")
    parser.add_argument("--task", help="with --pin: the lm-eval task the data is for (pinned in --lock)")
    parser.add_argument("--new-lock", type=Path, help="with --pin: where the new lock is written (never overwritten)")
    parser.add_argument("--replace", action="store_true", help="with --pin: replace this command's own earlier pin "
                        "(--new-lock holding profile PROFILE, and its <PROFILE>-data folder) once the new pin "
                        "succeeded")
    parser.add_argument("--notice", help="with --pin: mark the profile as a demo with this notice on every output")
    parser.add_argument("--attention", choices=("eager", "sdpa"), help="with --pin: the profile's attention "
                                                                      "implementation (default: the lock's)")
    parser.add_argument("--add-bos-token", action="store_true", help="with --pin: the tokenizer adds its BOS token "
                                                                     "(lm-eval's add_bos_token=True), in both paths")
    parser.add_argument("--num-fewshot", type=int, metavar="N", help="with --pin: the profile's few-shot count "
                                                                    "(default: the lock's, 0)")
    parser.add_argument("--max-length", type=int, metavar="N",
                        help="with --pin: the profile's longest input in tokens (long few-shot contexts; nothing "
                             "is truncated)")
    parser.add_argument("--shots-may-show-sealed-rows", action="store_true",
                        help="with --pin: allow shots drawn from the evaluated split to show sealed confirmation rows "
                             "(recorded and shown on the card)")
    _chat_options(parser)
    parser.add_argument("--dev-rows", metavar="N|all", type=_dev_rows,
                        help="with --pin: the profile's dev rows, a count or `all` (every row of the split that is not "
                             "sealed), taken on past the sealed confirmation rows in the same hash order (default: "
                             "the lock's dev_rows)")
    parser.add_argument("--evaluator-wheel", type=Path, help="with --pin of a task the lock does not pin: the pinned "
                                                             "lm-eval wheel (default: downloaded with pip)")
    _group_options(parser)
    return parser


def _group_options(parser) -> None:
    parser.add_argument("--group", metavar="NAME", help="prepare every profile of the lock's group NAME, each into "
                        "--cache/<profile>")
    parser.add_argument("--pin-group", metavar="NAME",
                        help="write a NEW lock (--new-lock) = --lock + group NAME of the lm-eval group --task: one "
                             "profile NAME-TASK per --subtask, all on --model")
    parser.add_argument("--subtask", action="append", metavar="TASK=DATA",
                        help="with --pin-group (two or more): a subtask of the group and its data folder")
    parser.add_argument("--rows", type=int, metavar="N", help="with --pin-group: dev rows run per subtask "
                                                              "(default: the lock's dev_rows)")


def _dev_rows(text: str):
    """--dev-rows: `all` or a count (the lock's reader checks its range)."""
    if text == "all" or text.isdigit():
        return text if text == "all" else int(text)
    raise ValueError(text)


def _chat_options(parser) -> None:
    parser.add_argument("--apply-chat-template", action="store_true",
                        help="with --pin: prompts through the model's own chat template (lm-eval's "
                             "apply_chat_template; the template file is pinned with the model)")
    parser.add_argument("--fewshot-as-multiturn", action="store_true",
                        help="with --pin and --apply-chat-template: the shots as user/assistant turns")
    parser.add_argument("--system-instruction", metavar="TEXT",
                        help="with --pin: lm-eval's system_instruction (a system message under a chat template, "
                             "plain text before the prompt without one)")


def _settings(args) -> dict:
    """The profile settings given on the command line, only those (the lock's reader validates each)."""
    given = {"attention": args.attention, "add_bos_token": args.add_bos_token or None,
             "num_fewshot": args.num_fewshot, "max_length": args.max_length,
             "shots_may_show_sealed_rows": args.shots_may_show_sealed_rows or None,
             "dev_rows": args.dev_rows, "apply_chat_template": args.apply_chat_template or None,
             "fewshot_as_multiturn": args.fewshot_as_multiturn or None, "system_instruction": args.system_instruction}
    return {key: value for key, value in given.items() if value is not None}


def _variables(args, model: dict) -> list:
    """A folder outside the new lock's is named by a variable (never a path in the lock): set it on each machine."""
    return [f"{name}={args.model}" for name in PLACEHOLDER.findall(str(model.get("path") or ""))]


def _pin_group(args, parser) -> int:
    missing = [option for option, value in (("--model", args.model), ("--task", args.task), ("--subtask", args.subtask),
                                            ("--new-lock", args.new_lock)) if value is None]
    if missing:
        parser.error(f"--pin-group needs {', '.join(missing)} (--task names the lm-eval group)")
    if args.data is not None or args.replace:
        parser.error("--pin-group takes each subtask's data as --subtask TASK=DATA, and never replaces a lock")
    entry, model, notes = pin_group(args.lock, args.new_lock, args.pin_group, args.task, parse_subtasks(args.subtask),
                                    args.model, args.notice, args.rows, args.evaluator_wheel, _settings(args))
    print(f"pinned: {args.new_lock} = {args.lock.name} + group {args.pin_group} ({args.task}, {entry['yaml']}, "
          f"{entry['rows']} dev rows per subtask) with profiles {', '.join(entry['profiles'])}; next: " +
          " ".join(_variables(args, model) + [
              f"{command_line('prepare', '--lock', args.new_lock, '--group', args.pin_group)} --cache <cache>, then "
              f"{command_line('run', '--lock', args.new_lock, '--group', args.pin_group)} --cache <cache>"]))
    for note in notes:
        print(note)
    return 0


def _group(args) -> int:
    lock = load_lock(args.lock)
    numeric_mode(lock)
    spec = group_spec(lock, args.group)
    for task, profile_name in spec.members:
        profile = lock.profile(profile_name)
        manifest, action = prepare.prepare(lock, profile, args.cache / profile_name, args.import_dir,
                                           spec_for_run(lock, profile, None).eval_split, not args.no_weights)
        print(f"{action}: {args.cache / profile_name} holds {len(manifest.files)} verified files for {task} "
              f"(profile {profile_name})")
    return 0


def _pin(args, parser) -> int:
    missing = [option for option, value in (("--model", args.model), ("--data", args.data), ("--task", args.task),
                                            ("--new-lock", args.new_lock)) if value is None]
    if missing:
        parser.error(f"--pin needs {', '.join(missing)}")
    profile, model, notes = pin(args.lock, args.new_lock, args.pin, args.task, args.model, args.data, args.notice,
                                args.evaluator_wheel, _settings(args), replace=args.replace)

    variables = _variables(args, model)
    print(f"pinned: {args.new_lock} = {args.lock.name} + profile {args.pin} (task {args.task}, model entry "
          f"{profile['model']!r} with {len(model['files'])} files, splits "
          f"{', '.join(f['split'] + ' ' + str(f['rows']) + ' rows' for f in profile['data']['files'])}); next: "
          + " ".join(variables + [command_line("prepare", "--lock", args.new_lock, "--profile", args.pin)
                                  + " --cache <cache>"]))
    for note in notes:
        print(note)
    return 0


