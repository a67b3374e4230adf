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


@dataclass(frozen=True)
class Generation:
    tokens: tuple  # the generated token ids, the stopping token included (as generate returns them)
    text: str  # what lm-eval logs as the response
    margins: tuple  # per step: the chosen token's float32 logit minus the runner-up's
    runner_up: tuple  # per step: the runner-up token's id
    stopped: str  # "eos", "stop string <i>" (index into until), or "max_gen_toks"

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
        self._lookback = {}  # stop string -> how many generated tokens MultiTokenEOSCriteria decodes

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

    def decode(self, context_tokens: tuple, rule: StopRule) -> Generation:
        import torch
        from transformers import DynamicCache

        if len(context_tokens) + rule.max_gen_toks > self.max_length:
            raise InputError(f"the context is {len(context_tokens)} tokens; with max_gen_toks {rule.max_gen_toks} "
                             f"it exceeds max_length {self.max_length}, and lm-eval would cut the context from the "
                             "left: the protocol never truncates.")
        cache, generated, margins, runner_up = DynamicCache(), [], [], []
        step_input = torch.tensor([context_tokens], dtype=torch.long)
        length = len(context_tokens)
        with torch.inference_mode():
            while True:
                positions = torch.arange(length - step_input.shape[1], length, dtype=torch.long)
                logits = self.model(input_ids=step_input, attention_mask=torch.ones(1, length, dtype=torch.long),
                                    position_ids=positions[None], cache_position=positions, past_key_values=cache,
                                    use_cache=True, logits_to_keep=1).logits[0, -1].float()
                top = torch.topk(logits, 2)
                token = int(torch.argmax(logits))  # the first maximum, as generate's argmax
                generated.append(token)
                other = int(top.indices[1]) if int(top.indices[0]) == token else int(top.indices[0])
                margins.append(float(logits[token] - logits[other]))
                runner_up.append(other)
                reason = self.stop_reason(generated, rule)
                if reason:
                    return Generation(tuple(generated), self.text(generated, rule), tuple(margins),
                                      tuple(runner_up), reason)
                step_input, length = torch.tensor([[token]], dtype=torch.long), length + 1
