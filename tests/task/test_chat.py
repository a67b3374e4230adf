"""Chat templates (issue 61): the embedded Instruct model's own template, pinned and rendered in a sandbox; its runs
scored through lm-eval with apply_chat_template / system_instruction / fewshot_as_multiturn and through the
independent path bit for bit (every logged prompt equal to ours), audited PASS; hostile templates refused or
contained. Runs in both releases."""

import json
import random
import sys
from pathlib import Path

import pytest

from support.builders import prepare_run_audit
from support.paths import DEMOS, REPO
from support.processes import run_script
from sst2_audit.formats.releases import installed_version

RELEASE_DEMOS = {"0.4.9.2": DEMOS, "0.4.13": REPO / "demos-lm-eval-0.4.13.lock.json"}[installed_version()]
SYSTEM = "You label the sentiment of short demo sentences written for sst2-audit."


def _variant(tmp_path: Path, settings: dict) -> Path:
    """The release's demo lock with the 3-shot chat profile's settings replaced."""
    raw = json.loads(RELEASE_DEMOS.read_text())
    raw["profiles"]["embedded-sst2-chat-3shot"]["settings"] = settings
    lock = tmp_path / "chat.lock.json"
    lock.write_text(json.dumps(raw, indent=1))
    (tmp_path / "data").symlink_to(REPO / "data")  # demo data paths are relative to the lock's folder
    return lock


VARIANTS = {  # name: the profile's settings, the user turns and assistant turns a prompt then holds
    "shipped-0shot": (None, 1, 1),
    "3shot-one-user-turn": ({"apply_chat_template": True, "num_fewshot": 3}, 1, 1),
    "3shot-multiturn-system": (None, 4, 4),
    "system-instruction-without-template": ({"system_instruction": SYSTEM, "num_fewshot": 3}, 0, 0),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_chat_run_s_prompts_scores_and_audit_equal_lm_eval_s(variant, tmp_path):
    """The embedded SmolLM2-135M-Instruct with the GGUF's own template: lm-eval's logged prompt of every row equals
    the independent render (the run's identity check), both paths' scores are bit for bit equal, the default audit
    rescores every row and passes."""
    settings, users, assistants = VARIANTS[variant]
    profile = "embedded-sst2-chat" if variant == "shipped-0shot" else "embedded-sst2-chat-3shot"
    lock = RELEASE_DEMOS if settings is None else _variant(tmp_path, settings)
    record = prepare_run_audit(lock, profile, tmp_path, bundle=variant == "3shot-multiturn-system")
    assert record["max_abs_diff"] == 0.0
    stated = json.loads(lock.read_text())["profiles"][profile]["settings"]
    assert record["settings"]["apply_chat_template"] is stated.get("apply_chat_template", False)
    assert record["settings"]["system_instruction"] == stated.get("system_instruction")
    assert record["settings"]["fewshot_as_multiturn"] is stated.get("fewshot_as_multiturn", False)
    contexts = [q["context"] for q in json.loads((tmp_path / "private" / "private.json").read_text())["questions"]]
    for context in contexts:
        assert context.count("<|im_start|>user\n") == users and context.count("<|im_start|>assistant\n") == assistants
        if stated.get("system_instruction"):
            assert SYSTEM in context
        if stated.get("apply_chat_template"):
            assert context.endswith("<|im_start|>assistant\n")
            assert ("You are a helpful AI assistant named SmolLM" in context) is (not stated.get("system_instruction"))
    logged = [json.loads(line) for path in (tmp_path / "out").glob("lm_eval_samples*.jsonl")
              for line in path.read_text().splitlines()]
    assert logged and all(s["arguments"][0][1] == ("negative" if stated.get("apply_chat_template") else " negative")
                          for s in logged if "arguments" in s and s["arguments"] and isinstance(s["arguments"][0], list))


def test_a_run_whose_pinned_template_changed_in_the_cache_stops_before_anything_is_scored(tmp_path):
    from support.builders import prepare_cache

    cache = prepare_cache(RELEASE_DEMOS, "embedded-sst2-chat", tmp_path)
    template = cache / "model" / "chat_template.jinja"
    text = template.read_text()
    template.unlink()  # the cache's file is a link into the shared store: replaced, never written through
    template.write_text(text.replace("helpful", "harmful"))
    done = run_script("run.py", "--lock", RELEASE_DEMOS, "--profile", "embedded-sst2-chat", "--cache", cache,
                      "--smoke", "--out", tmp_path / "out", "--private", tmp_path / "private")
    assert done.returncode == 1 and "chat_template.jinja" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


# --- hostile templates --------------------------------------------------------------------------------------------

CANARY = "sst2-audit-chat-canary"
ESCAPES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ cycler.__init__.__globals__.os.popen('touch " + CANARY + "').read() }}",
    "{{ lipsum.__globals__['os'].system('touch " + CANARY + "') }}",
    "{{ joiner.__init__.__globals__ }}",
    "{{ namespace.__init__.__globals__ }}",
    "{{ raise_exception.__globals__ }}",
    "{{ messages.__class__.__base__.__subclasses__() }}",
    "{% set x = messages.append({'role': 'user', 'content': 'x'}) %}{{ messages|length }}",
    "{{ messages.pop() }}",
    "{{ (messages|first).update({'content': 'changed'}) }}",
    "{{ self._TemplateReference__context }}",
    "{{ '{0.__class__.__mro__}'.format(1) }}",
    "{{ '%s'|format(messages.__class__) }}",
    "{% include '/etc/passwd' %}",
    "{% import 'os' as os %}{{ os }}",
    "{% extends '/etc/hostname' %}",
    "{{ strftime_now('%Y-%m-%d') }}",
    "{% for m in messages %}{{ m.content",
    "{{ undefined_name.attribute }}",
    "{{ raise_exception('refused by its own rule') }}",
    "{{ '\\ud800' }}",
]


def _loop(rng: random.Random) -> str:
    depth, size = rng.randint(2, 4), rng.choice([999, 9999, 99999])
    body = "{{ i }}" if rng.random() < 0.3 else ""
    opened = "".join(f"{{% for i{d} in range({size}) %}}" for d in range(depth))
    return opened + body.replace("i", "i0") + "{% endfor %}" * depth


def _growth(rng: random.Random) -> str:
    return rng.choice([
        "{% set ns = namespace(s='xy') %}{% for i in range(" + str(rng.randint(30, 64)) + ") %}"
        "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
        "{{ 'x' * " + str(10 ** rng.randint(7, 12)) + " }}",
        "{{ 'x'|center(" + str(10 ** rng.randint(8, 10)) + ") }}",
        "{{ " + str(rng.randint(9, 99)) + " ** " + str(rng.randint(99, 9999)) + " ** 9 }}",
        "{{ range(" + str(10 ** rng.randint(6, 12)) + ")|list|length }}",
        "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
        "{% macro f(n) %}{{ f(n ~ n) }}{% endmacro %}{{ f('a') }}",
        "{{ messages * " + str(10 ** rng.randint(6, 9)) + " }}",
    ])


def hostile_templates(count: int, seed: int) -> list:
    rng = random.Random(seed)
    made = list(ESCAPES)
    while len(made) < count:
        kind = rng.random()
        piece = rng.choice(ESCAPES) if kind < 0.3 else _loop(rng) if kind < 0.6 else _growth(rng)
        prefix = rng.choice(["", "{% for message in messages %}{{ message.content }}{% endfor %}", "{{ bos_token }}"])
        made.append(prefix + piece)
    return made


def test_200_generated_hostile_templates_are_refused_or_contained(tmp_path, monkeypatch):
    """Sandbox escapes, unbounded loops and growth, recursion, file access: each either renders to bounded text or is
    refused as bad input naming the template's hash; no file is made, the command's own process is untouched."""
    from sst2_audit.task.chat import ChatTemplate, MAX_PROMPT_CHARACTERS, render
    from sst2_audit.util.errors import InputError
    from sst2_audit.util.hashing import sha256_text

    monkeypatch.chdir(tmp_path)
    conversation = [{"role": "system", "content": "demo"}, {"role": "user", "content": "a demo question"}]
    outcomes = {"rendered": 0, "refused": 0}
    for text in hostile_templates(200, 61):
        template = ChatTemplate(text, sha256_text(text), "generated", {"bos_token": "<|im_start|>"})
        try:
            rendered = render(template, [conversation])
        except InputError as error:
            assert template.sha256 in str(error) and "Traceback" not in str(error), text
            outcomes["refused"] += 1
            continue
        assert len(rendered) == 1 and len(rendered[0]) <= MAX_PROMPT_CHARACTERS, text
        assert "__globals__" not in rendered[0] and "<class" not in rendered[0], (text, rendered[0][:200])
        outcomes["rendered"] += 1
    assert not list(tmp_path.iterdir()) and not Path("/tmp", CANARY).exists()
    assert outcomes["refused"] >= 150 and outcomes["rendered"] >= 1, outcomes


def test_lm_eval_s_system_role_fallback_is_followed():
    """A template that refuses a system turn (raise_exception) is rendered again without it, as HFLM does."""
    from sst2_audit.task.chat import ChatTemplate, render
    from sst2_audit.util.hashing import sha256_text

    text = ("{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system role') }}{% endif %}"
            "[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}")
    template = ChatTemplate(text, sha256_text(text), "inline", {})
    assert render(template, [[{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]]) == [
        "[user] q\n[assistant] "]


# --- a plain `lm_eval --apply_chat_template` run, adopted --------------------------------------------------------

CHAT = "embedded-sst2-chat-3shot"
CHAT_FLAGS = ("--apply_chat_template", "--fewshot_as_multiturn", "--system_instruction", SYSTEM)


@pytest.fixture(scope="module")
def chat_runs(tmp_path_factory) -> Path:
    """The 3-shot chat profile's cache, and real `lm_eval` console runs of its first 16 dev rows: with the chat flags
    (the run as the profile says), with them on a copy of the model whose template was changed, and without them."""
    from support.builders import built_once

    return built_once(tmp_path_factory, f"chat-runs-{installed_version()}", _build_chat_runs)


def _build_chat_runs(folder: Path) -> None:
    import shutil

    from support.builders import prepare_cache
    from support.plain_runs import task_yaml, plain_lm_eval
    shutil.copy(RELEASE_DEMOS, folder / "demos.lock.json")
    (folder / "data").symlink_to(REPO / "data")
    cache = prepare_cache(folder / "demos.lock.json", CHAT, folder)
    ids = sorted(task_yaml(folder / "demos.lock.json", cache, folder / "sst2.yaml", profile=CHAT))
    plain_lm_eval(folder, "chat", ids, num_fewshot=3, extra=CHAT_FLAGS)
    plain_lm_eval(folder, "plain", ids, num_fewshot=3)
    other = folder / "other-model"
    shutil.copytree(cache / "model", other)  # copies: the cache's links into the store stay untouched
    template = other / "chat_template.jinja"
    text = template.read_text()
    assert text.count("<|im_start|>assistant\n") == 1
    template.write_text(text.replace("<|im_start|>assistant\n", "<|im_start|>assistant\n\n"))
    plain_lm_eval(folder, "other-template", ids, num_fewshot=3, extra=CHAT_FLAGS, model=other)


def _output(chat_runs: Path, name: str) -> Path:
    return next((chat_runs / name).rglob("results_*.json")).parent


def _adopt(chat_runs: Path, output: Path, cwd: Path, *args):
    return run_script(str(Path(sys.executable).parent / "sst2-audit"), "adopt", output, "--lock",
                      chat_runs / "demos.lock.json", "--profile", CHAT, "--cache", chat_runs / "cache", *args, cwd=cwd)


def test_a_plain_lm_eval_chat_run_is_adopted_and_passes(chat_runs, tmp_path):
    done = _adopt(chat_runs, _output(chat_runs, "chat"), tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: PASS"), done.stdout


def _edited_copy(chat_runs: Path, name: str, tmp_path: Path, edit) -> Path:
    import shutil

    copy = tmp_path / name
    shutil.copytree(_output(chat_runs, name), copy)
    results = next(copy.glob("results_*.json"))
    raw = json.loads(results.read_text())
    edit(raw)
    results.write_text(json.dumps(raw))
    return copy


def test_a_changed_logged_template_fails_at_claims_naming_both_hashes(chat_runs, tmp_path):
    from sst2_audit.util.hashing import sha256_text

    pinned = json.loads(RELEASE_DEMOS.read_text())["models"]["embedded-smollm2-chat"]["files"][0]["sha256"]

    def changed(raw):
        raw["chat_template"] = raw["chat_template"].replace("helpful", "harmless")
        raw["chat_template_sha"] = sha256_text(raw["chat_template"])
    copy = _edited_copy(chat_runs, "chat", tmp_path, changed)
    done = _adopt(chat_runs, copy, tmp_path)
    logged = sha256_text(json.loads(next(copy.glob("results_*.json")).read_text())["chat_template"])
    assert done.returncode == 1 and "claims: FAIL" in done.stdout, done.stdout
    assert pinned in done.stdout and logged in done.stdout and "chat_template_sha" in done.stdout


def test_a_run_rendered_with_another_template_fails_by_row_even_when_its_results_name_the_pinned_one(
        chat_runs, tmp_path):
    pinned = json.loads(_output(chat_runs, "chat").joinpath(
        next(_output(chat_runs, "chat").glob("results_*.json")).name).read_text())

    done = _adopt(chat_runs, _output(chat_runs, "other-template"), tmp_path)
    assert done.returncode == 1 and "chat_template_sha" in done.stdout, done.stdout  # as it was made: at claims

    def hidden(raw):
        raw["chat_template"], raw["chat_template_sha"] = pinned["chat_template"], pinned["chat_template_sha"]
    done = _adopt(chat_runs, _edited_copy(chat_runs, "other-template", tmp_path, hidden), tmp_path)
    assert done.returncode == 1 and "identity: FAIL" in done.stdout and "prompt_hash" in done.stdout, done.stdout


def test_a_run_made_without_the_template_that_claims_it_fails_by_row(chat_runs, tmp_path):
    chat = json.loads(next(_output(chat_runs, "chat").glob("results_*.json")).read_text())

    def claimed(raw):
        for key in ("chat_template", "chat_template_sha", "system_instruction", "system_instruction_sha",
                    "fewshot_as_multiturn"):
            raw[key] = chat[key]
    done = _adopt(chat_runs, _edited_copy(chat_runs, "plain", tmp_path, claimed), tmp_path)
    assert done.returncode == 1 and "identity: FAIL" in done.stdout and "prompt_hash" in done.stdout, done.stdout


# --- generate_until under a chat template: a GSM8K-shaped demo pinned with the chat flags, a plain run adopted ---

GSM_CHAT = [  # (profile, the lock it is pinned on, the lock it writes, its chat flags besides the template)
    ("gsmchat", "base", "first", ("--fewshot-as-multiturn", "--system-instruction", "Answer the demo sum.")),
    ("gsmchat1", "first", "both", ()),
]
OWN_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")  # ChatML-shaped, ours


@pytest.fixture(scope="module")
def gsm_chat(release_cache, tmp_path_factory) -> Path:
    from support.builders import built_once

    return built_once(tmp_path_factory, f"gsm-chat-{installed_version()}", lambda f: _build_gsm_chat(f, release_cache))


def _build_gsm_chat(folder: Path, release_cache: Path) -> None:
    from support.builders import tiny_model_folder
    from support.plain_runs import task_yaml, plain_lm_eval
    from support.demo_data import word_problems
    from support.paths import RELEASE_LOCK

    model = tiny_model_folder(folder / "model", 31, release_cache)
    (model / "chat_template.jinja").write_text(OWN_TEMPLATE)
    data = folder / "data"
    data.mkdir()
    for split, count, seed in (("train", 30, 1), ("test", 200, 2)):
        (data / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in word_problems(count, seed, split)))
    lock, first = folder / "gsm.lock.json", folder / "first.lock.json"
    for profile, given, new, flags in GSM_CHAT:
        done = run_script("prepare.py", "--lock", {"base": RELEASE_LOCK, "first": first}[given], "--pin", profile,
                          "--task", "gsm8k", "--model", model, "--data", data, "--new-lock",
                          {"first": first, "both": lock}[new], "--num-fewshot", "3", "--apply-chat-template", *flags)
        assert done.returncode == 0, done.stdout + done.stderr
    for profile, *_ in GSM_CHAT:
        done = run_script("prepare.py", "--lock", lock, "--profile", profile, "--cache", folder / f"cache-{profile}")
        assert done.returncode == 0, done.stderr
    (folder / "cache").symlink_to(folder / "cache-gsmchat")  # where plain_lm_eval finds the model and the data
    ids = task_yaml(lock, folder / "cache", folder / "gsm8k.yaml", profile="gsmchat")
    one_turn = ("--fewshot_as_multiturn", "false") if installed_version() == "0.4.13" else ()  # its CLI's default
    plain_lm_eval(folder, "gsmchat", sorted(ids[:6]), task="gsm8k", num_fewshot=3,
                  extra=("--apply_chat_template", "--fewshot_as_multiturn", "--system_instruction",
                         "Answer the demo sum."))
    plain_lm_eval(folder, "gsmchat1", sorted(ids[:6]), task="gsm8k", num_fewshot=3,
                  extra=("--apply_chat_template", *one_turn))


@pytest.mark.parametrize("profile", ["gsmchat", "gsmchat1"])
def test_a_plain_gsm8k_chat_run_is_re_decoded_token_for_token(gsm_chat, tmp_path, profile):
    """generate_until under the template: every logged prompt re-rendered (the pinned template; three shots as
    turns after a system instruction, or in one user turn, which 0.4.9.2 draws twice), every generation re-decoded
    token for token: PASS."""
    lock = json.loads((gsm_chat / "gsm.lock.json").read_text())
    assert lock["profiles"][profile]["settings"]["apply_chat_template"] is True
    model = lock["profiles"][profile]["model"]
    model = lock["models"][model] if isinstance(model, str) else model  # a shared entry is named
    assert "chat_template.jinja" in [f["path"] for f in model["files"]]
    done = run_script(str(Path(sys.executable).parent / "sst2-audit"), "adopt", gsm_chat / profile, "--lock",
                      gsm_chat / "gsm.lock.json", "--profile", profile, "--cache", gsm_chat / f"cache-{profile}",
                      cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("VERDICT: PASS") and "  rows: 6 token for token" in done.stdout.splitlines()


def test_pin_refuses_apply_chat_template_for_a_model_without_a_template(release_cache, tmp_path):
    from support.builders import tiny_model_folder
    from support.demo_data import word_problems
    from support.paths import RELEASE_LOCK

    model = tiny_model_folder(tmp_path / "model", 31, release_cache)
    (tmp_path / "data").mkdir()
    for split, count in (("train", 30), ("test", 200)):
        rows = word_problems(count, 2, split)
        (tmp_path / "data" / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = run_script("prepare.py", "--lock", RELEASE_LOCK, "--pin", "nochat", "--task", "gsm8k", "--model", model,
                      "--data", tmp_path / "data", "--new-lock", tmp_path / "new.lock.json", "--apply-chat-template")
    assert done.returncode == 2 and "has no chat template" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "new.lock.json").exists()


def test_compare_of_the_same_model_with_and_without_its_template_names_the_settings_and_the_paired_test(tmp_path):
    """The question model-card readers ask: the same rows scored with and without the chat template, compared: the
    settings that differ, the flips each way, the paired difference and McNemar's exact p."""
    from support.builders import prepare_cache

    outs = []
    for name, settings in (("plain", {"num_fewshot": 3}), ("chat", None)):
        folder = tmp_path / name
        folder.mkdir()
        lock = RELEASE_DEMOS if settings is None else _variant(folder, settings)
        cache = prepare_cache(lock, CHAT, folder)
        done = run_script("run.py", "--lock", lock, "--profile", CHAT, "--cache", cache, "--smoke", "--out",
                          folder / "out", "--private", folder / "private", "--run-name", name)
        assert done.returncode == 0, done.stderr[-2000:]
        outs.append(folder / "out")
    done = run_script("audit.py", "--compare", *outs, "--lock", RELEASE_DEMOS)
    assert done.returncode == 1 and done.stdout.startswith("comparison verdict: different"), done.stdout
    assert "setting apply_chat_template: False -> True" in done.stdout and "setting fewshot_as_multiturn" in done.stdout
    assert "exact McNemar p = " in done.stdout and "flips: right in A, wrong in B: " in done.stdout


def test_a_multiple_input_task_under_a_chat_template_is_refused_before_any_model_call(tmp_path):
    from support.builders import prepare_cache

    raw = json.loads(RELEASE_DEMOS.read_text())
    profile = raw["profiles"]["embedded-winogrande-5shot"]
    profile["model"], profile["settings"] = "embedded-smollm2-chat", dict(profile["settings"], apply_chat_template=True)
    lock = tmp_path / "wino.lock.json"
    lock.write_text(json.dumps(raw))
    (tmp_path / "data").symlink_to(REPO / "data")
    cache = prepare_cache(lock, "embedded-winogrande-5shot", tmp_path)
    done = run_script("run.py", "--lock", lock, "--profile", "embedded-winogrande-5shot", "--cache", cache, "--smoke",
                      "--out", tmp_path / "out", "--private", tmp_path / "private")
    assert done.returncode == 2 and "a multiple-input task" in done.stderr and "chat template" in done.stderr
    assert "[model load]" not in done.stderr and not (tmp_path / "out").exists()


def test_generated_chat_claims_in_a_real_results_file_are_refused_or_failed_never_a_crash(chat_runs, tmp_path):
    """300 generated edits of the five chat fields of a real chat run's results file (other types, lone surrogates,
    huge text, a changed character, the field removed), each read by the strict reader and checked by the claims:
    bad input (InputError) or a claims failure naming the field, never another exception; a pass only where every
    field still says what the profile says."""
    from sst2_audit.audit.adopt import Adoption, prepare_rows
    from sst2_audit.audit.adopt_chat import check
    from sst2_audit.audit.adopt_shapes import shape_for
    from sst2_audit.audit.findings import LevelResult
    from sst2_audit.formats import lm_eval_output
    from sst2_audit.formats.lock import load_lock
    from sst2_audit.task.spec import spec_for
    from sst2_audit.util.errors import InputError

    lock = load_lock(chat_runs / "demos.lock.json")
    profile = lock.profile(CHAT)
    spec = spec_for(lock, profile.task)
    source = _output(chat_runs, "chat")
    results_file, samples_file = next(source.glob("results_*.json")), next(source.glob("samples_*.jsonl"))
    honest = json.loads(results_file.read_text())
    fields = ("chat_template", "chat_template_sha", "system_instruction", "system_instruction_sha",
              "fewshot_as_multiturn")
    rng = random.Random(61)
    pool = [None, 0, 1.5, True, False, [], {}, ["x"], {"k": "v"}, "", "\ud800", "x" * 100_000, "None", "false"]
    outcomes = {"refused": 0, "failed": 0, "passed": 0}
    for case in range(300):
        raw, field = json.loads(json.dumps(honest)), rng.choice(fields)
        kind = rng.random()
        if kind < 0.15:
            del raw[field]
        elif kind < 0.45 and isinstance(raw[field], str) and raw[field]:
            at = rng.randrange(len(raw[field]))
            raw[field] = raw[field][:at] + chr(rng.choice([0x20, 0x41, 0xE9, 0x1F600])) + raw[field][at + 1:]
        else:
            raw[field] = rng.choice(pool)
        path = tmp_path / f"results_{case}.json"
        path.write_text(json.dumps(raw, ensure_ascii=True))
        try:
            output = lm_eval_output.read_plain_files(path, samples_file, spec.name, spec.metrics, public=False)
        except InputError:
            outcomes["refused"] += 1
            continue
        adoption = Adoption(lock, profile, spec, chat_runs / "cache", output, 0, None, None, shape=shape_for(spec))
        prepare_rows(adoption, roles=())
        level = LevelResult("claims")
        check(adoption, level)
        changed = any(raw.get(f) != honest.get(f) for f in fields) and not (
            field == "fewshot_as_multiturn" and raw.get(field) is None and honest[field] is False)
        if level.problems:
            assert changed and any(field in problem for problem in level.problems), (field, level.problems)
            outcomes["failed"] += 1
        else:
            assert not changed or raw.get(field) == honest.get(field), (field, raw.get(field))
            outcomes["passed"] += 1
    assert outcomes["failed"] >= 150 and outcomes["refused"] + outcomes["failed"] + outcomes["passed"] == 300, outcomes


def test_generated_tokenizer_configs_give_a_template_or_bad_input_never_a_crash(tmp_path):
    """The pinned template is read from a model's files, which someone else wrote (`--pin`): 150 generated
    tokenizer_config.json files (the template of other types, a lone surrogate, oversized, absent, not JSON, a list
    of named templates) and chat_template.jinja files (not UTF-8, oversized): a template or InputError naming the
    file, never another exception; a file changed after it was pinned is CheckFailed."""
    from sst2_audit.formats.manifest import Manifest, ManifestFile
    from sst2_audit.task.chat import MAX_TEMPLATE_BYTES, template_of
    from sst2_audit.util.errors import CheckFailed, InputError
    from sst2_audit.util.hashing import sha256_file

    rng = random.Random(612)
    values = [None, 0, True, [], ["a"], [{"name": "default", "template": "x"}], {"k": 1}, "", "{{ bos_token }}",
              "\ud800", "x" * (MAX_TEMPLATE_BYTES + 1), OWN_TEMPLATE]
    outcomes = {"template": 0, "refused": 0, "changed": 0}
    for case in range(150):
        cache = tmp_path / str(case)
        (cache / "model").mkdir(parents=True)
        config = {"bos_token": rng.choice(["<s>", {"content": "<s>"}, 3, None]), "eos_token": "</s>"}
        if rng.random() < 0.8:
            config["chat_template"] = rng.choice(values)
        text = json.dumps(config) if rng.random() < 0.9 else rng.choice(["{not json", "[" * 100_000])
        (cache / "model" / "tokenizer_config.json").write_text(text)
        names = ["tokenizer_config.json"]
        if rng.random() < 0.3:
            names.append("chat_template.jinja")
            (cache / "model" / "chat_template.jinja").write_bytes(rng.choice(
                [OWN_TEMPLATE.encode(), b"\xff\xfe{{ x }}", b"x" * (MAX_TEMPLATE_BYTES + 1)]))
        files = tuple(ManifestFile(f"model/{n}", "model", 0, sha256_file(cache / "model" / n), "test", None)
                      for n in names)
        if rng.random() < 0.1:  # a byte changed after the cache was prepared
            (cache / "model" / names[-1]).write_bytes((cache / "model" / names[-1]).read_bytes() + b" ")
        manifest = Manifest("p", True, "0" * 64, True, files)
        try:
            template = template_of(cache, manifest, "p")
        except CheckFailed as error:
            assert "changed since it was prepared" in str(error)
            outcomes["changed"] += 1
            continue
        except InputError as error:
            assert str(cache) in str(error) or "profile p" in str(error), str(error)
            outcomes["refused"] += 1
            continue
        assert isinstance(template.text, str) and len(template.sha256) == 64
        template.text.encode("utf-8")
        outcomes["template"] += 1
    assert min(outcomes.values()) > 0, outcomes
