"""A loglikelihood_rolling request (lm-eval's perplexity tasks) on the independent path: the whole text's tokens
cut into windows the model sees one at a time, each window's continuation scored, the scores summed in window
order. Written from the rule lm-eval states (SOURCE_MAP steps 94-96), no lm_eval import: the first window predicts
up to max_length tokens after one prefix token; each later window predicts the next max_length tokens at most,
conditioned on the tokens just before them so that the model's input is max_length tokens; no token is predicted
twice and none is truncated."""

from sst2_audit.scoring.independent import EncodedPair
from sst2_audit.util.errors import InputError


def rolling_windows(tokens: list, prefix_token: int, max_length: int) -> list:
    """[(context tokens, predicted tokens)] of one text's tokens: every token predicted exactly once, in order, and
    no window's model input (context + predicted, less the last) longer than max_length."""
    if max_length < 1:
        raise InputError(f"max_length {max_length}: a rolling window needs at least one token.")
    windows, predicted = [], min(max_length, len(tokens))
    if tokens:
        # the model sees the prefix and all but the last predicted token
        windows.append(EncodedPair((prefix_token,), tuple(tokens[:predicted])))
    while predicted < len(tokens):
        end = min(len(tokens), predicted + max_length)
        # the input is the max_length tokens before `end`'s last: the context is what precedes the first predicted
        context = tuple(tokens[end - max_length - 1:predicted])  # end > max_length here
        windows.append(EncodedPair(context, tuple(tokens[predicted:end])))
        predicted = end
    return windows


def prefix_token(tokenizer) -> int:
    """The token the first window is conditioned on: the tokenizer's BOS, else its EOS (lm-eval's prefix_token_id
    for a Hugging Face model; a custom prefix token is a model argument the profile does not pin)."""
    token = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if token is None:
        raise InputError("the tokenizer names neither a BOS nor an EOS token: a rolling window has no prefix token.")
    return token


def text_tokens(tokenizer, text: str, bos: bool = False) -> list:
    """The text's tokens as lm-eval's tok_encode gives them (add_special_tokens = the profile's add_bos_token)."""
    return list(tokenizer(text, add_special_tokens=bos)["input_ids"])
