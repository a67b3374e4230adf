"""The independent greedy decoder: our own loop over the model's forward pass (no `generate()`, no lm_eval import).

Written from lm-eval's Hugging Face backend (generate_until, SOURCE_MAP steps 75-79) and the transformers greedy
loop it calls: the context is encoded as lm-eval encodes it and never truncated (the protocol refuses a context
longer than max_length - max_gen_toks); each step feeds the one new token with the key/value cache and an
all-ones attention mask, as `generate` does for one unpadded sequence, and takes the first maximum of the float32
logits; a step ends the generation when the token is one of the model's EOS ids (generate's own rule), when a
stop string appears in the decoded last len(encode(stop)) + 2 generated tokens (lm-eval's MultiTokenEOSCriteria),
or when max_gen_toks tokens were generated. The text is the generated tokens decoded without special tokens, cut
at each stop string in turn (lm-eval's postprocess_generated_text).
"""

import dataclasses
from dataclasses import dataclass

from sst2_audit.util.errors import InputError

# generation_config.json keys that do not change a greedy decode of one unpadded sequence: the ids (EOS is read),
# the sampling knobs greedy ignores, bookkeeping. Anything else (repetition_penalty, min_length, bad_words_ids,
# forced tokens, suppress_tokens...) adds a logits processor lm-eval's run would apply: refused, not re-derived.
GREEDY_NEUTRAL = {"_from_model_config", "bos_token_id", "eos_token_id", "pad_token_id", "transformers_version",
                  "do_sample", "temperature", "top_k", "top_p", "max_length", "max_new_tokens", "use_cache",
                  "decoder_start_token_id"}


@dataclass(frozen=True)
class StopRule:
    """When a greedy generation ends, from the task's generation_kwargs and the model's files."""
    until: tuple  # the task's stop strings, then the tokenizer's EOS text (lm-eval's handle_stop_sequences)
    max_gen_toks: int
    eos_ids: tuple  # generation_config.json's eos_token_id(s): transformers stops on them itself


MAX_BACKTRACKS = 64  # a decode following a logged text goes back to an earlier branch point at most this often


@dataclass(frozen=True)
class Step:
    token: int
    margin: float  # its logit over the best other token's
    runner_up: int
    tie: dict | None  # following a logged text: {"step", "gap", "logit", "rank"} when it is not the maximum
    others: tuple = ()  # the other tokens this step could take (following a logged text), best first


@dataclass(frozen=True)
class Generation:
    tokens: tuple  # the generated token ids, the stopping token included (as generate returns them)
    text: str  # what lm-eval logs as the response
    margins: tuple  # per step: the chosen token's float32 logit minus the runner-up's
    runner_up: tuple  # per step: the runner-up token's id
    stopped: str  # "eos", "stop string <i>" (index into until), "max_gen_toks", or "left the logged text"
    ties: tuple = ()  # following a logged text: {"step", "gap", "logit", "rank"} where a near tie was taken its way
    left_at: dict | None = None  # following a logged text: {"step", "gap": None, "logit"} where no token kept to it

    @property
    def closest(self) -> tuple:
        """(step, margin) of the closest call: where another machine's rounding could pick another token."""
        if not self.margins:
            return (None, None)
        step = min(range(len(self.margins)), key=self.margins.__getitem__)
        return step, self.margins[step]


def context_tokens(tokenizer, context: str, bos: bool) -> tuple:
    """The context as HFLM.tok_batch_encode encodes one string (add_special_tokens = add_bos_token; a context
    already opening with the BOS text gets none)."""
    opens_with_bos = isinstance(tokenizer.bos_token, str) and context.startswith(tokenizer.bos_token)
    return tuple(tokenizer(context, add_special_tokens=bos and not opens_with_bos)["input_ids"])


def stop_rule(tokenizer, generation_kwargs: dict, generation_config: dict, default_max: int = 256) -> StopRule:
    """The stop rule of a task's generation_kwargs on this model (lm-eval's default max_gen_toks is 256)."""
    unknown = sorted(set(generation_config) - GREEDY_NEUTRAL)
    if unknown:
        raise InputError(f"the model's generation_config.json sets {unknown}: transformers would apply them to "
                         "lm-eval's greedy decode; the independent decoder does not re-derive them.")
    until = generation_kwargs.get("until")
    until = [until] if isinstance(until, str) else list(until or [])
    eos_text = tokenizer.decode(tokenizer.eos_token_id, skip_special_tokens=False)
    if eos_text not in until:
        until.append(eos_text)
    eos = generation_config.get("eos_token_id")
    eos_ids = tuple(eos) if isinstance(eos, list) else (eos,) if isinstance(eos, int) else ()
    return StopRule(tuple(until), int(generation_kwargs.get("max_gen_toks", default_max)), eos_ids)


class GreedyDecoder:
    def __init__(self, model, tokenizer, max_length: int):
        self.model, self.tokenizer, self.max_length = model, tokenizer, max_length
        self._lookback: dict = {}  # stop string -> how many generated tokens MultiTokenEOSCriteria decodes

    def lookback(self, stop: str) -> int:
        if stop not in self._lookback:
            self._lookback[stop] = len(self.tokenizer.encode(stop, add_special_tokens=False)) + 2
        return self._lookback[stop]

    def stop_reason(self, generated: list, rule: StopRule) -> str | None:
        if generated[-1] in rule.eos_ids:
            return "eos"
        for number, stop in enumerate(rule.until):
            if stop in self.tokenizer.decode(generated[-self.lookback(stop):], skip_special_tokens=False):
                return f"stop string {number}"
        return "max_gen_toks" if len(generated) >= rule.max_gen_toks else None

    def text(self, generated: list, rule: StopRule) -> str:
        text = self.tokenizer.decode(generated, skip_special_tokens=True)
        for stop in rule.until:
            if stop:
                text = text.split(stop)[0]
        return text

    def decode(self, context_tokens: tuple, rule: StopRule, logged: str | None = None, near=None,
               forced: dict | None = None) -> Generation:
        """Greedy from the context. Given the logged text and `near(gap, logit)`, the decode follows it: where our
        first maximum would leave the logged text, the best token that keeps to it is taken instead if its logit is
        within `near` of the maximum (a tie broken the other way: recorded in `ties`). Text can be split into tokens
        in more than one way, so a step with other tokens within the bound that keep to the text is a branch point:
        stuck later, the decode goes back to the latest one and takes its next token (at most MAX_BACKTRACKS
        times). A logged text no such decode reaches stops at the furthest step (`left_at`).
        Without the text, `forced` ({step: rank}, the ties a decode that followed it recorded) takes at those steps
        the token of that rank among the tokens within `near` of the maximum, best first, and greedy elsewhere: the
        same tokens where the logits are the same; a rank with no such token stops there (`left_at`)."""
        import torch
        from transformers import DynamicCache

        if len(context_tokens) + rule.max_gen_toks > self.max_length:
            raise InputError(f"the context is {len(context_tokens)} tokens; with max_gen_toks {rule.max_gen_toks} "
                             f"it exceeds max_length {self.max_length}, and lm-eval would cut the context from the "
                             "left: the protocol never truncates.")
        cache = DynamicCache()
        steps: list = []
        backtracks = 0
        furthest: tuple[int, dict | None] = (-1, None)
        step_input = torch.tensor([context_tokens], dtype=torch.long)
        with torch.inference_mode():
            while True:
                length = len(context_tokens) + len(steps)
                positions = torch.arange(length - step_input.shape[1], length, dtype=torch.long)
                # no attention_mask: one row has no padding, and transformers builds the same causal mask without
                # the padding term (bit for bit, tests/task/test_generation.py), where an all-ones mask cost a vmap
                # of its padding function every step (half a tiny model's decode time)
                logits = self.model(input_ids=step_input, position_ids=positions[None], cache_position=positions,
                                    past_key_values=cache, use_cache=True, logits_to_keep=1).logits[0, -1].float()
                options = self._options(logits, [s.token for s in steps], rule, logged, near, forced or {})
                if not options:  # stuck: back to the latest step with another token to try
                    if len(steps) > furthest[0]:
                        furthest = (len(steps), {"step": len(steps), "gap": None, "logit": float(logits.max())})
                    while steps and not steps[-1].others:
                        steps.pop()
                    if not steps or backtracks >= MAX_BACKTRACKS:
                        return self._generation(steps, rule, "left the logged text", furthest[1])
                    backtracks += 1
                    last = steps.pop()
                    cache.crop(len(context_tokens) + len(steps))
                    options = list(last.others)
                steps.append(dataclasses.replace(options[0], others=tuple(options[1:])))
                reason = self.stop_reason([s.token for s in steps], rule)
                if reason:
                    return self._generation(steps, rule, reason)
                step_input = torch.tensor([[steps[-1].token]], dtype=torch.long)

    @staticmethod
    def _margin(logits, token: int) -> tuple[float, int]:
        """(the token's logit over the best other token's, that token's id)."""
        import torch

        top = torch.topk(logits, 2)
        other = int(top.indices[1]) if int(top.indices[0]) == token else int(top.indices[0])
        return float(logits[token] - logits[other]), other

    def _options(self, logits, generated: list, rule: StopRule, logged: str | None, near, forced: dict) -> list:
        """The tokens this step may take, best first, each a Step: greedily, the first maximum alone (at a forced
        step, the token of the forced rank); following a logged text, every token within the bound of the maximum
        that keeps to it (a near tie where not the maximum, recorded with its rank among the tokens within the
        bound: 0 is the maximum)."""
        import torch

        best, step = int(torch.argmax(logits)), len(generated)  # the first maximum, as generate's argmax
        if logged is None and step not in forced:
            return [Step(best, *self._margin(logits, best), None)]
        top, found = float(logits[best]), []
        ranked = dict.fromkeys([best] + torch.topk(logits, min(64, logits.shape[0])).indices.tolist())
        for rank, candidate in enumerate(ranked):
            gap = top - float(logits[candidate])
            if candidate != best and not near(gap, top):
                break
            tie = None if candidate == best else {"step": step, "gap": gap, "logit": top, "rank": rank}
            if logged is None and rank == forced[step]:
                return [Step(candidate, *self._margin(logits, candidate), tie)]
            if logged is not None and self._keeps_to(generated + [candidate], rule, logged):
                found.append(Step(candidate, *self._margin(logits, candidate), tie))
        return found

    def _keeps_to(self, generated: list, rule: StopRule, logged: str) -> bool:
        """Whether these tokens can still give the logged text: their text runs along it (a split character's
        replacement mark aside) or past it into a stop string; a stop reached must leave exactly the logged text."""
        if self.stop_reason(generated, rule):
            return self.text(generated, rule) == logged
        full = self.tokenizer.decode(generated, skip_special_tokens=True).rstrip("\ufffd")
        if logged.startswith(full):
            return True
        extra = full[len(logged):] if full.startswith(logged) else None
        return extra is not None and any(s and (s.startswith(extra) or extra.startswith(s)) for s in rule.until)

    def _generation(self, steps: list, rule: StopRule, stopped: str, left=None) -> Generation:
        tokens = [s.token for s in steps]
        return Generation(tuple(tokens), self.text(tokens, rule), tuple(s.margin for s in steps),
                          tuple(s.runner_up for s in steps), stopped, tuple(s.tie for s in steps if s.tie), left)
