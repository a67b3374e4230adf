"""The chat claims of an adopted run (issue 61): lm-eval logs the template it rendered (`chat_template`, its sha256
`chat_template_sha`), the system instruction and fewshot_as_multiturn in the results file. Each is compared with
the reviewer's profile: the template with the model's pinned one, both hashes named. The prompts themselves are
re-derived row by row by the identity level (task/chat.py renders the pinned template), so a run that claims a
template but was made without it, or with another, fails there by row."""

from sst2_audit.audit.findings import LevelResult
from sst2_audit.task.chat import ChatSettings, TEMPLATE_FILE, template_of
from sst2_audit.util.hashing import sha256_text


def check(adoption, level: LevelResult) -> None:
    results = adoption.output.results
    chat = ChatSettings.of(adoption.settings)
    pinned = template_of(adoption.cache, adoption.split_rows.manifest, adoption.profile.name) \
        if chat.apply_chat_template else None
    logged_template = results.get("chat_template")
    if pinned is None:
        level.expect("results", "chat_template", None, _shown(logged_template))
    else:
        level.expect("results", "chat_template_sha (the template lm-eval says it rendered)", pinned.sha256,
                     results.get("chat_template_sha"))
        level.expect("results", "chat_template (sha256 of the logged text)", pinned.sha256,
                     sha256_text(logged_template) if isinstance(logged_template, str) else logged_template)
    level.expect("results", "system_instruction", chat.system_instruction, results.get("system_instruction"))
    if chat.system_instruction is not None:
        level.expect("results", "system_instruction_sha", sha256_text(chat.system_instruction),
                     results.get("system_instruction_sha"))
    logged = results.get("fewshot_as_multiturn", False)
    # 0.4.13 logs None when it was not given: without a chat template it is False (config/evaluate_config.py lines
    # 352-361); with one its CLI makes it True before the run, and logs that
    level.expect("results", "fewshot_as_multiturn", chat.fewshot_as_multiturn, False if logged is None else logged)
    if not chat.apply_chat_template and any(f.path.endswith(TEMPLATE_FILE) for f in
                                            adoption.split_rows.manifest.model_files()):
        level.notes.append("the model pins a chat template (an instruct model) and the run was made without it, as "
                           "your profile says: its number is of plain prompts, not of the model as it is chatted with")


def _shown(value):
    """A logged value as a finding names it: text by its sha256 (a template is long), anything else as it is. The
    results file passed the strict reader (formats/strict_json.py): no text in it holds a lone surrogate."""
    return "sha256:" + sha256_text(value) if isinstance(value, str) else value
