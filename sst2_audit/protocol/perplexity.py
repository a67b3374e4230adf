"""A loglikelihood_rolling task's metrics (lm-eval's perplexity tasks): each document logs the pair
[log-likelihood of its whole text, a count of its words or bytes]; the task reports a ratio of the sums, with no
stderr ("N/A": lm-eval's stderr_for_metric has none for these aggregations). As lm-eval computes them
(api/task.py process_results, api/metrics.py weighted_mean, weighted_perplexity, bits_per_byte; SOURCE_MAP
step 97): in doc_id order, sums of Python floats and ints."""

import math
import re
from dataclasses import dataclass
from typing import Callable, Literal

NO_STDERR = "N/A"  # what lm-eval reports as these metrics' stderr


def count_words(text: str) -> int:
    return len(re.split(r"\s+", text))  # lm-eval's count_words: a leading or trailing space counts a word


def count_bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def _weighted_mean(pairs: list) -> float:
    scores, counts = zip(*pairs)
    return sum(scores) / sum(counts)


@dataclass(frozen=True)
class RollingMetric:
    name: str  # lm-eval's, in the samples and the results
    unit: Literal["words", "bytes"]  # what the document's count is of
    statistic: Callable  # the pairs [log-likelihood, count] in doc_id order -> the reported number
    what: str  # one line: what the number is
    aggregation: str  # lm-eval's registered name of the statistic (a YAML may name it; another is refused)

    def count(self, text: str) -> int:
        return count_words(text) if self.unit == "words" else count_bytes(text)

    def aggregate(self, pairs: list) -> float:
        return self.statistic(pairs)


ROLLING_METRICS = {
    "word_perplexity": RollingMetric("word_perplexity", "words", lambda pairs: math.exp(-_weighted_mean(pairs)),
                                     "exp(-sum of log-likelihoods / sum of words)", "weighted_perplexity"),
    "byte_perplexity": RollingMetric("byte_perplexity", "bytes", lambda pairs: math.exp(-_weighted_mean(pairs)),
                                     "exp(-sum of log-likelihoods / sum of UTF-8 bytes)", "weighted_perplexity"),
    "bits_per_byte": RollingMetric("bits_per_byte", "bytes", lambda pairs: -_weighted_mean(pairs) / math.log(2),
                                   "-(sum of log-likelihoods / sum of UTF-8 bytes) / ln 2", "bits_per_byte"),
}
