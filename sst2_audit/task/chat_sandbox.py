"""The chat template's renderer, run as its own process (task/chat.py starts it): a template is code written by
someone else, so it renders here, never in the command's own process.

Two walls. Jinja's ImmutableSandboxedEnvironment, configured as transformers' own chat-template environment is
(trim_blocks, lstrip_blocks, loopcontrols, a `generation` block, tojson without HTML escaping, raise_exception),
allows no attribute of a private or unsafe name and no change to a list or dict; every call, attribute, item and
arithmetic operator the template makes checks a CPU budget. The process itself may write no file (RLIMIT_FSIZE 0),
may not grow past RLIMIT_AS, and is killed at RLIMIT_CPU and at the caller's wall-clock timeout.

Reads one JSON object on stdin: template, conversations [messages], variables (the tokenizer's special tokens),
budget_seconds, max_output; writes {"rendered": [...]} or {"error": words}. Imports only the standard library and
jinja2, and is started with `python -I` (no user site, no environment variables, not the working directory).
"""

import functools
import json
import resource
import sys
import time

MEMORY_BYTES = 1 << 30  # address space: far above a real template's needs, far below the machine's
CPU_SECONDS = 4  # the kernel's backstop; the budget below stops a template first


class BudgetExceeded(Exception):
    """Not a jinja2 TemplateError: lm-eval's system-role fallback must not retry it."""


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def _budgeted(check, max_output: int):
    """Jinja's immutable sandbox with the budget checked on every call, attribute, item and arithmetic operator."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class Budgeted(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["*", "**", "+", "//", "%"])

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - jinja's own signature
            check()
            return super().call(__context, __obj, *args, **kwargs)

        def getattr(self, obj, attribute):
            check()
            return super().getattr(obj, attribute)

        def getitem(self, obj, argument):
            check()
            return super().getitem(obj, argument)

        def call_binop(self, context, operator, left, right):
            check()
            if operator == "**" and isinstance(right, (int, float)) and abs(right) > 64:
                raise BudgetExceeded(f"an exponent of {right} in the template")
            if operator == "*" and any(isinstance(side, (str, list, tuple)) for side in (left, right)):
                count = right if isinstance(left, (str, list, tuple)) else left
                size = len(left) if isinstance(left, (str, list, tuple)) else len(right)
                if isinstance(count, int) and count * max(size, 1) > max_output:
                    raise BudgetExceeded("the template repeats a string past the output limit")
            return super().call_binop(context, operator, left, right)

    return Budgeted


def environment(deadline: float, max_output: int):
    import jinja2
    from jinja2.ext import Extension, loopcontrols

    def check() -> None:
        if time.process_time() > deadline:
            raise BudgetExceeded("the template ran past its render budget (a loop that does not end?)")

    class Generation(Extension):
        """transformers' `{% generation %}` block renders its body unchanged when no mask is asked for."""
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

        def _body(self, caller):
            return caller()

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        raise BudgetExceeded("the template reads the clock (strftime_now): its prompt changes with the day it is "
                             "rendered, so no audit can re-derive it")

    def guarded(function):
        """A filter whose numeric argument could make a string of any size (center, indent, wordwrap...)."""
        def call(*args, **kwargs):
            check()
            if any(type(value) is int and abs(value) > max_output for value in (*args, *kwargs.values())):
                raise BudgetExceeded("a filter's argument passes the output limit")
            return function(*args, **kwargs)
        return functools.update_wrapper(call, function)  # keeps jinja's pass_context / pass_environment mark

    env = _budgeted(check, max_output)(trim_blocks=True, lstrip_blocks=True, extensions=[Generation, loopcontrols])
    env.filters["tojson"] = tojson
    env.filters = {name: guarded(function) for name, function in env.filters.items()}
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def _render(compiled, messages: list, variables: dict, max_output: int) -> str:
    pieces, size = [], 0
    for piece in compiled.generate(messages=messages, tools=None, documents=None, add_generation_prompt=True,
                                   **variables):
        size += len(piece)
        if size > max_output:
            raise BudgetExceeded(f"the rendered prompt passed {max_output} characters")
        pieces.append(piece)
    return "".join(pieces)


def render_all(request: dict) -> list:
    """Every conversation rendered as HFLM.apply_chat_template renders it (add_generation_prompt): a TemplateError
    renders it again without its system messages, as lm-eval does (models/huggingface.py, apply_chat_template)."""
    import jinja2

    deadline = time.process_time() + float(request["budget_seconds"])
    env = environment(deadline, int(request["max_output"]))
    compiled = env.from_string(request["template"])
    rendered = []
    for messages in request["conversations"]:
        try:
            rendered.append(_render(compiled, messages, request["variables"], request["max_output"]))
        except jinja2.exceptions.TemplateError:
            kept = [message for message in messages if message["role"] != "system"]
            rendered.append(_render(compiled, kept, request["variables"], request["max_output"]))
    return rendered


def main() -> int:
    _limits()
    answer: dict
    try:
        request = json.loads(sys.stdin.read())
        answer = {"rendered": render_all(request)}
    except MemoryError:
        answer = {"error": f"the template needed more than {MEMORY_BYTES >> 20} MiB"}
    except RecursionError:
        answer = {"error": "the template recursed without end"}
    except Exception as error:  # a template's own error, a sandbox refusal, the budget: all the template's doing
        answer = {"error": f"{type(error).__name__}: {str(error)[:300]}"}
    sys.stdout.write(json.dumps(answer, ensure_ascii=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
