"""Prompts as lm-eval builds them under `apply_chat_template`, `system_instruction` and `fewshot_as_multiturn`,
re-derived without lm-eval or transformers (SOURCE_MAP steps 88-93, both releases).

What lm-eval does (ConfigurableTask.fewshot_context; 0.4.13 through build_qa_turn and multiturn_to_singleturn):
- the system prompt is the system instruction and the task's description joined by the few-shot delimiter (0.4.9.2
  always; 0.4.13 only where neither has whitespace at the join), else whichever is set;
- without a chat template it is plain text before the shots and the question;
- with one: a system message (when there is a system prompt); the shots as user/assistant turns
  (fewshot_as_multiturn) or all of them as one user turn, which the question then joins; the question as a user
  turn; the conversation rendered by the tokenizer's template with the generation prompt (HFLM.apply_chat_template,
  which renders again without the system messages when the template raises a TemplateError);
- multiple_choice under a chat template scores each choice with no target delimiter (construct_requests).
The template is the model's pinned file, hashed before it is read and rendered in a sandboxed process of its own
(task/chat_sandbox.py). A multiple-input task (winogrande) under a chat template is refused.
"""

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sst2_audit.formats import strict_json
from sst2_audit.task import fewshot
from sst2_audit.util.errors import CheckFailed, InputError, mismatch
from sst2_audit.util.hashing import sha256_file, sha256_text
from sst2_audit.util.progress import say

TEMPLATE_FILE = "chat_template.jinja"  # transformers' own file name; it wins over tokenizer_config.json's
TOKENIZER_CONFIG = "tokenizer_config.json"
MAX_TEMPLATE_BYTES = 256 * 1024  # real templates with tool use are about 10-20 KB
MAX_PROMPT_CHARACTERS = 4 << 20  # one rendered prompt
BUDGET_SECONDS = 0.1  # the sandbox's CPU budget for the first prompt; each further prompt adds PER_PROMPT
PER_PROMPT_SECONDS = 0.01
SANDBOX = Path(__file__).with_name("chat_sandbox.py")
SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


@dataclass(frozen=True)
class ChatSettings:
    """lm-eval's three settings, as a profile (and run.json's settings) states them."""
    apply_chat_template: bool = False
    system_instruction: str | None = None
    fewshot_as_multiturn: bool = False

    @classmethod
    def of(cls, settings: dict) -> "ChatSettings":
        return cls(settings.get("apply_chat_template") is True, settings.get("system_instruction"),
                   settings.get("fewshot_as_multiturn") is True)

    @property
    def plain(self) -> bool:
        """lm-eval's defaults: the prompt as the task renders it, nothing around it (run.json's settings then state
        the protocol's fixed choices: task/fewshot.py::protocol_settings)."""
        return not self.apply_chat_template and self.system_instruction is None


@dataclass(frozen=True)
class ChatTemplate:
    text: str
    sha256: str  # sha256 of the text: what lm-eval logs as chat_template_sha
    source: str  # the pinned file it was read from
    variables: dict  # the tokenizer's special tokens, which transformers hands every render


def _pinned_bytes(cache: Path, manifest, name: str) -> bytes | None:
    """A model file's bytes, hashed against the manifest (itself matched to the lock) before they are read."""
    entry = next((f for f in manifest.model_files() if Path(f.path).name == name), None)
    if entry is None:
        return None
    path = Path(cache) / entry.path
    if path.stat().st_size > MAX_TEMPLATE_BYTES and name == TEMPLATE_FILE:
        raise InputError(f"{path}: a chat template of {path.stat().st_size} bytes; at most {MAX_TEMPLATE_BYTES} are "
                         "read.")
    actual = sha256_file(path)
    if actual != entry.sha256:
        raise CheckFailed(mismatch(f"{path}: sha256", entry.sha256, actual, "The cache changed since it was prepared."))
    return path.read_bytes()


def template_of(cache: Path, manifest, profile_name: str) -> ChatTemplate:
    """The model's pinned chat template: chat_template.jinja, else tokenizer_config.json's `chat_template`."""
    config_bytes = _pinned_bytes(cache, manifest, TOKENIZER_CONFIG)
    # the project's strict reader: UTF-8, JSON within its depth, no lone surrogate in any text (the template's too)
    config = strict_json.loads(config_bytes, f"{cache}/model/{TOKENIZER_CONFIG}") if config_bytes is not None else {}
    if not isinstance(config, dict):
        raise InputError(f"{cache}/model/{TOKENIZER_CONFIG}: expected a JSON object.")
    raw, source = _pinned_bytes(cache, manifest, TEMPLATE_FILE), TEMPLATE_FILE
    text: object
    if raw is not None:
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InputError(f"{cache}/model/{TEMPLATE_FILE}: not UTF-8 text ({error}).") from None
    else:
        text, source = config.get("chat_template"), f"{TOKENIZER_CONFIG} chat_template"
        if text is None:
            raise InputError(f"profile {profile_name} sets apply_chat_template, but its model pins no chat template "
                             f"(expected a {TEMPLATE_FILE} file or a chat_template in {TOKENIZER_CONFIG}).")
        if not isinstance(text, str):
            raise InputError(f"{cache}/model/{TOKENIZER_CONFIG}: chat_template must be one template (text), got "
                             f"{type(text).__name__}; named templates are not supported.")
        if len(text.encode("utf-8")) > MAX_TEMPLATE_BYTES:
            raise InputError(f"{cache}/model/{TOKENIZER_CONFIG}: a chat template over {MAX_TEMPLATE_BYTES} bytes.")
    assert isinstance(text, str)
    return ChatTemplate(text, sha256_text(text), source, special_tokens(config))


def special_tokens(config: dict) -> dict:
    """transformers' special_tokens_map from the tokenizer's config: the tokens a template may name."""
    found: dict = {}
    for key in SPECIAL_TOKENS:
        value = config.get(key)
        value = value.get("content") if isinstance(value, dict) else value
        if isinstance(value, str):
            found[key] = value
    extra = config.get("additional_special_tokens")
    if isinstance(extra, list) and extra:
        found["additional_special_tokens"] = [t.get("content") if isinstance(t, dict) else t for t in extra]
    return found


def system_prompt(chat: ChatSettings, description: str, delimiter: str, release) -> str:
    instruction = chat.system_instruction
    if release.builds_qa_turns:  # maybe_delimit(system_instruction, description, fewshot_delimiter)
        if not instruction or not description:
            return description or instruction or ""
        joined = instruction[-1].isspace() or description[0].isspace()
        return instruction + description if joined else instruction + delimiter + description
    if instruction is not None and description:
        return f"{instruction}{delimiter}{description}"
    return instruction if instruction is not None else description


def conversation(spec, doc: dict, shots: list, chat: ChatSettings, delimiter: str, release):
    """The question's prompt as text (no chat template) or as the messages the template renders."""
    system = system_prompt(chat, spec.prefix(doc), delimiter, release)
    text = spec.text(doc)
    if not chat.apply_chat_template:
        return system + "".join(fewshot.shot_text(spec, shot, delimiter) for shot in shots) + text
    messages = [{"role": "system", "content": system}] if system else []
    if shots and chat.fewshot_as_multiturn:
        for shot in shots:
            messages.append({"role": "user", "content": spec.shot_question(shot)})
            answer = fewshot.shot_answer(spec, shot)
            if answer is not None or not release.builds_qa_turns:  # 0.4.13 logs no turn for an empty answer
                messages.append({"role": "assistant", "content": answer or ""})
    elif shots:
        messages.append({"role": "user", "content": "".join(fewshot.shot_text(spec, s, delimiter) for s in shots)})
    if chat.fewshot_as_multiturn or not messages or messages[-1]["role"] == "system":
        messages.append({"role": "user", "content": text})
    else:  # the one user turn of the shots: the question joins it
        messages[-1]["content"] += text
    return messages


def target_delimiter(spec, chat: ChatSettings) -> str:
    """What joins a multiple_choice context and its choice: none under a chat template (construct_requests, SOURCE_MAP
    step 92), else the task's target_delimiter. The run scores with it and the audit's arithmetic checks it."""
    return "" if chat.apply_chat_template else spec.target_delimiter


def wastes_a_draw(chat: ChatSettings, release) -> bool:
    """0.4.9.2's get_chat_context with the shots in one user turn draws them twice (task/fewshot.py::draws)."""
    return chat.apply_chat_template and not chat.fewshot_as_multiturn and not release.builds_qa_turns


def refuse_unsupported(spec, chat: ChatSettings, docs) -> None:
    """A gen_prefix is refused for every task (task/support.py); a multiple-input task only under a template."""
    if chat.apply_chat_template and any(spec.input_index(doc) is not None for doc in docs):
        raise InputError(f"task {spec.name}: a multiple-input task (each choice in the context) under a chat template "
                         "is not re-derived yet.")


def render(template: ChatTemplate, conversations: list) -> list:
    """Every conversation rendered through the template in the sandbox process; the template's own error, a
    sandbox refusal or a budget overrun is bad input (exit 2) naming the template."""
    budget = BUDGET_SECONDS + PER_PROMPT_SECONDS * len(conversations)
    request = {"template": template.text, "conversations": conversations, "variables": template.variables,
               "budget_seconds": budget, "max_output": MAX_PROMPT_CHARACTERS}
    where = f"the chat template ({template.source}, sha256 {template.sha256})"
    try:
        done = subprocess.run([sys.executable, "-I", str(SANDBOX)], input=json.dumps(request, ensure_ascii=True),
                              capture_output=True, text=True, timeout=budget + 10)
    except subprocess.TimeoutExpired:
        raise InputError(f"{where} could not be rendered: the renderer ran past its time. Nothing was "
                         "scored.") from None
    if done.returncode != 0:
        raise InputError(f"{where} could not be rendered: the renderer stopped (exit {done.returncode}). Nothing was "
                         "scored.")
    # the strict reader: a prompt holding a lone surrogate (a template's string escape) is refused by field
    answer = strict_json.loads(done.stdout.encode("utf-8"), f"{where}: the renderer's answer")
    if isinstance(answer, dict) and "error" in answer:
        raise InputError(f"{where} could not be rendered: {answer['error']}. Nothing was scored.")
    rendered = answer.get("rendered") if isinstance(answer, dict) else None
    if not (isinstance(rendered, list) and len(rendered) == len(conversations)
            and all(isinstance(r, str) for r in rendered)):
        raise InputError(f"{where}: the renderer's answer is not one prompt per conversation.")
    return rendered


@dataclass(frozen=True)
class ChatPlan:
    """Every scored question's prompt under the profile's chat settings, rendered once; the few-shot plan (or None
    at zero shots) it was built from answers what a Plan answers."""
    shots: fewshot.Plan | None
    contexts: dict  # idx -> the rendered prompt
    target_delimiter: str  # "" for multiple_choice under a chat template (construct_requests)
    positions: dict  # idx -> positions of its shots in the shot split ([] at zero shots), as a Plan's

    def requests(self, spec, idx: int, doc: dict) -> list:
        return spec.shape.context_requests(spec, doc, self.contexts[idx], self.target_delimiter)

    @property
    def rule(self):
        return self.shots.rule if self.shots else None

    def own_question(self, spec) -> list:
        return self.shots.own_question(spec) if self.shots else []

    def sealed(self, spec, confirm_ids) -> list:
        return self.shots.sealed(spec, confirm_ids) if self.shots else []


def plan(spec, chat: ChatSettings, shots: fewshot.Plan | None, rows: list, template: ChatTemplate | None,
         release) -> ChatPlan:
    """rows: the scored dataset rows. The prompts of a plain-text system instruction need no template."""
    docs = {row.idx: row.as_doc() for row in rows}
    refuse_unsupported(spec, chat, docs.values())
    delimiter = shots.rule.delimiter if shots else fewshot.rule_delimiter(spec)
    built = {idx: conversation(spec, doc, [shots.docs[p] for p in shots.positions[idx]] if shots else [], chat,
                               delimiter, release) for idx, doc in sorted(docs.items())}
    positions = {idx: list(shots.positions[idx]) if shots else [] for idx in built}
    if not chat.apply_chat_template:
        return ChatPlan(shots, built, target_delimiter(spec, chat), positions)
    assert template is not None
    ids = list(built)
    say(f"[chat] rendering {len(ids)} prompts through the pinned chat template ({template.source}, sha256 "
        f"{template.sha256[:12]}...) in a sandboxed process")
    contexts = dict(zip(ids, render(template, [built[idx] for idx in ids])))
    return ChatPlan(shots, contexts, target_delimiter(spec, chat), positions)
