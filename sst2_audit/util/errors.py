"""The exit codes, defined once (docs/cli.md's table and the README's list are checked against EXIT_CODES),
and the errors that carry them."""

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_BUG, EXIT_LIMITED = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130  # the shell's code for a process stopped by SIGINT (128 + 2), so scripts see Ctrl-C as such
# The reader of the output went away (`| head`): the shell's code for SIGPIPE (128 + 13), what `yes | head` gives; not
# 1, which a pipeline would read as a failed check
EXIT_BROKEN_PIPE = 141
EXIT_TERMINATED = 143  # SIGTERM (128 + 15): a plain `kill`, a launcher or a CI timeout; handled as Ctrl-C is
EXIT_CODES = {
    EXIT_PASS: "all checks passed",
    EXIT_FAIL: "a check failed (hash, identity, agreement, an audit level, a bundle's SHA256SUMS, a refused bundle: "
               "limits, names, headers, members, CRC, trailing data; an old record schema without "
               "`--accept-old-schema`)",
    EXIT_USAGE: "bad usage or unreadable input",
    EXIT_BUG: "an internal error of sst2-audit (a short message; the traceback with `--debug`)",
    EXIT_LIMITED: "audit, adopt and corpus only: no problem found, but not everything verified (`--structural`, "
                  "`--arithmetic-only`, `--rescore N`, drift only, scores within an adopted run's bound, "
                  "`--accept-old-schema`, `--trust-bundle-lock`); the verdict line names what",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C); nothing half-written was kept",
    EXIT_BROKEN_PIPE: "the reader of the output went away (a pipe closed early, by `head` say); nothing "
                      "half-written was kept",
    EXIT_TERMINATED: "terminated (SIGTERM: a plain kill); nothing half-written was kept",
}
# The same, in the few words a command's --help gives each.
EXIT_WORDS = {EXIT_PASS: "all checks passed", EXIT_FAIL: "a check failed",
              EXIT_USAGE: "bad usage or input (one paragraph naming the file or option)",
              EXIT_BUG: "a bug in sst2-audit (--debug shows the traceback)",
              EXIT_LIMITED: "audit.py only: no problem found but not everything verified (--structural, --rescore N, "
                            "--arithmetic-only, drift only, --accept-old-schema, --trust-bundle-lock): the verdict "
                            "line names what",
              EXIT_INTERRUPTED: "interrupted (Ctrl-C)", EXIT_BROKEN_PIPE: "the output's reader went away (head)",
              EXIT_TERMINATED: "terminated (SIGTERM)"}


class AuditError(Exception):
    """Base class: a one-paragraph message for the user."""

    exit_code = EXIT_USAGE


class InputError(AuditError):
    """Bad usage or unreadable/invalid input (exit 2)."""

    exit_code = EXIT_USAGE


class CheckFailed(AuditError):
    """A verification check failed (exit 1)."""

    exit_code = EXIT_FAIL


def mismatch(what: str, expected, actual, hint: str = "") -> str:
    """One paragraph naming the thing, the expected and the actual value."""
    text = f"{what}: expected {expected!s}, got {actual!s}."
    return f"{text} {hint}".strip()


class InternalError(AuditError):
    """Our own bug or an impossible state (exit 3)."""

    exit_code = EXIT_BUG


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread where Ctrl-C's KeyboardInterrupt would be: the same cleanup, exit 143."""
