"""A lock's run settings: what a profile may set for its own model, the bounds every value must keep, and
which keys make up the numeric bootstrap."""

from sst2_audit.protocol.numeric import MODE_VARIABLES
from sst2_audit.util.errors import InputError


DTYPES = ("float32",)  # the protocol scores in float32 on the CPU


def sha256_value(value, where):
    if value is None:
        return None
    if not (isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)):
        raise InputError(f"{where}: sha256 must be 64 lower-case hex digits or null, got {value!r}.")
    return value


ATTENTION = ("eager", "sdpa")  # both paths share the one loaded model, so both run the same kernels


# What a profile may set for its own model; everything else is the lock's, for every profile.
PROFILE_SETTINGS = {"attention": lambda v: v in ATTENTION, "add_bos_token": lambda v: type(v) is bool,
                    "num_fewshot": lambda v: type(v) is int and 0 <= v <= 1024,
                    "max_length": lambda v: type(v) is int and 2 <= v <= 1 << 20,  # long few-shot contexts
                    # shots drawn from the evaluated split may show sealed confirmation rows: allowed only
                    # when the lock says so, recorded in every run's settings and shown on the card
                    "shots_may_show_sealed_rows": lambda v: v is True,
                    # f1 / mcc: lm-eval's bootstrap resamples for their stderr (simple_evaluate's default 100000)
                    "bootstrap_iters": lambda v: type(v) is int and 1 <= v <= 10_000_000,
                    # the seed of the run (lm-eval's four seeds; the few-shot draw): a study's shot-seed variants
                    "seed": lambda v: type(v) is int and 0 <= v < 1 << 32,
                    # the profile's dev rows: a count, or every row of the split that is not sealed (split.py)
                    "dev_rows": lambda v: v == "all" or type(v) is int and 2 <= v <= MAX_ROWS,
                    # lm-eval's chat settings (task/chat.py): the template is the model's pinned file
                    "apply_chat_template": lambda v: v is True, "fewshot_as_multiturn": lambda v: v is True,
                    "system_instruction": lambda v: isinstance(v, str) and 0 < len(v) <= SYSTEM_INSTRUCTION_CHARACTERS
                    and all(c.isprintable() or c in "\n\t" for c in v)}
SYSTEM_INSTRUCTION_CHARACTERS = 16_384


# Settings a lock need not state: lm-eval's HFLM default (no BOS), recorded in every run's settings.
RUN_SETTING_DEFAULTS = {"add_bos_token": False}


MAX_ROWS = 100_000  # dev and confirmation rows: every per-id loop of run and audit is bounded by these


def check_numbers(split: dict, settings: dict, where: str) -> None:
    """Values that would make a run meaningless are refused here, not deep inside torch."""

    if not (1 <= split["dev_rows"] <= MAX_ROWS and 0 <= split["confirm_rows"] <= MAX_ROWS):
        raise InputError(f"{where}: split.dev_rows must be within 1..{MAX_ROWS} and split.confirm_rows within "
                         f"0..{MAX_ROWS}, got {split['dev_rows']} and {split['confirm_rows']}.")
    for key, low, high in (("threads", 0, 1024), ("max_length", 2, 1 << 20), ("batch_size", 1, 4096),
                           ("num_fewshot", 0, 1024), ("seed", 0, 2 ** 32 - 1)):
        value = settings[key]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise InputError(f"{where}: run_settings.{key} must be an integer within {low}..{high}, got "
                             f"{str(value)[:40]!r}.")
    if settings["dtype"] not in DTYPES:
        raise InputError(f"{where}: run_settings.dtype must be one of {DTYPES}, got {settings['dtype']!r}.")
    if settings["device"] != "cpu" or settings["attention"] not in ATTENTION:
        raise InputError(f"{where}: run_settings.device must be 'cpu' and attention one of {ATTENTION}, got "
                         f"{settings['device']!r} and {settings['attention']!r}.")
    if type(settings.get("add_bos_token", False)) is not bool:
        raise InputError(f"{where}: run_settings.add_bos_token must be true or false, got "
                         f"{settings['add_bos_token']!r}.")
    mode = settings["numeric_mode"]
    if not isinstance(mode, dict) or not all(
            name in MODE_VARIABLES and isinstance(value, str) and value for name, value in mode.items()):
        raise InputError(f"{where}: run_settings.numeric_mode must map some of {MODE_VARIABLES} to non-empty "
                         f"strings ({{}} = the CPU's native mode), got {mode!r}.")
    sha256_value(settings.get("numeric_probe_sha256"), f"{where}: run_settings.numeric_probe_sha256")


# The run settings of the numeric bootstrap (mode, its probe, threads): a lock that differs from another only
# here pins the same measurement in another numeric mode (the audit names the difference; numeric.py,
# "Numeric platform").
NUMERIC_MODE_KEYS = ("numeric_mode", "numeric_mode_note", "numeric_probe_sha256", "threads", "threads_note")


def profile_settings(raw, where: str) -> dict:
    if not isinstance(raw, dict) or not all(key in PROFILE_SETTINGS and PROFILE_SETTINGS[key](value)
                                            for key, value in raw.items()):
        raise InputError(f"{where}: a profile may set attention ({' or '.join(ATTENTION)}), add_bos_token "
                         f"(true or false), num_fewshot (0..1024), max_length (2..1048576), shots_may_show_sealed_rows "
                         f"(true), bootstrap_iters (1..10000000), seed (0..4294967295), dev_rows (2..{MAX_ROWS} or "
                         f"\"all\"), apply_chat_template (true), fewshot_as_multiturn (true) and system_instruction "
                         f"(printable text, 1..{SYSTEM_INSTRUCTION_CHARACTERS} characters), got {str(raw)[:80]!r}.")
    if raw.get("fewshot_as_multiturn") and not raw.get("apply_chat_template"):
        raise InputError(f"{where}: fewshot_as_multiturn needs apply_chat_template (lm-eval refuses it alone).")
    return dict(raw)
