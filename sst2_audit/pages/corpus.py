"""corpus.html: a corpus pass's page, the runs ranked by what was found (failures, our bugs, refused input, runs not
verified, then passes), a pure function of corpus.json; written beside it after every run."""

import collections

from sst2_audit.formats.corpus import Corpus, pass_verdict, ranked
from sst2_audit.pages.render import render


def render_corpus(corpus: Corpus) -> str:
    code, head = pass_verdict(corpus)
    counts = sorted(collections.Counter(entry.verdict for entry in corpus.runs).items())
    return render("corpus.html.j2", corpus=corpus, code=code, head=head, counts=counts, runs=ranked(corpus))
