"""Agreement: the two paths' candidate scores must be identical, bit for bit."""

from sst2_audit.formats.records import Mismatch


def compare_scores(scored_ids: list, official: dict, independent: dict) -> tuple:
    """(max abs diff, one Mismatch per differing candidate score), by dev id and candidate."""
    max_abs_diff, disagreements = 0.0, []
    for position, idx in enumerate(scored_ids):
        if len(official[idx]) != len(independent[idx]):
            disagreements.append(Mismatch(position, idx, ["candidate count"],
                                          {"candidate count": len(independent[idx])},
                                          {"candidate count": len(official[idx])}))
            continue
        for number, (a, b) in enumerate(zip(official[idx], independent[idx])):
            max_abs_diff = max(max_abs_diff, abs(a - b))
            if a != b:
                disagreements.append(Mismatch(
                    position, idx, ["candidate_score"],
                    {"idx": idx, "candidate": number, "independent": b},
                    {"idx": idx, "candidate": number, "official": a}))
    return max_abs_diff, disagreements


def describe(disagreements: list, max_abs_diff: float) -> str:
    named = ", ".join(f"idx {m.claimed_id} candidate {m.expected.get('candidate', '?')}" for m in disagreements[:5])
    more = f" and {len(disagreements) - 5} more" if len(disagreements) > 5 else ""
    return (f"official and independent scores differ on {len(disagreements)} candidate score(s) ({named}{more}; "
            f"max abs diff {max_abs_diff!r}); under the pinned settings they must be identical.")
