"""Hypothesis strategies for the network fuzzer's input, built from the spec's grammar.

- `frames`: one well-formed frame of any client command of any version;
- `segmentations`: bytes cut into writes, often at the places a parser finds hardest;
- `valid_inputs`: a short well-formed session whose last frame asks a RECEIPT;
- `mutated_inputs`: inputs that each break one rule of the grammar or one statement,
  and name it (mutations.MUTATIONS);
- `fuzz_inputs`: what a campaign sends, valid one time in three.

The builders live in wellformed.py and mutations.py and read their choices off `Choices`;
here the words come from Hypothesis (uniform 16-octet strings: wide integers would be
drawn small most of the time, and every later choice would be 0), so Hypothesis shrinks
an input towards the plainest one. A campaign reads the same builders off a seeded
random source instead (generators.py).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from conformance.fuzz.inputs.choices import WORD_BITS, Choices
from conformance.fuzz.inputs.fuzz_input import FuzzInput
from conformance.fuzz.inputs.mutations import fuzz_input, mutated_input, weighted
from conformance.fuzz.inputs.wellformed import Written, frame_of, segment, valid_input
from conformance.spec.grammar import VERSIONS, Version

#: One word of choices.
WORD: st.SearchStrategy[int] = st.binary(min_size=WORD_BITS // 8, max_size=WORD_BITS // 8).map(
    lambda octets: int.from_bytes(octets, "big"))


def _versions(versions: Sequence[Version]) -> tuple[Version, ...]:
    unknown = [v for v in versions if v not in VERSIONS]
    if not versions or unknown:
        raise ValueError(f"versions must be a non-empty selection of {', '.join(VERSIONS)}, "
                         f"not {list(versions)!r}")
    return tuple(versions)


def frames(*, versions: Sequence[Version] = VERSIONS) -> st.SearchStrategy[Written]:
    """One well-formed frame of any client command of any of `versions`."""
    chosen = _versions(versions)
    return st.composite(lambda draw: frame_of(Choices.from_draw(draw, WORD), chosen))()


def segmentations(data: bytes, *, max_writes: int = 6) -> st.SearchStrategy[tuple[bytes, ...]]:
    """`data` cut into at most `max_writes` writes."""
    if max_writes < 1:
        raise ValueError(f"max_writes must be at least 1, not {max_writes}")
    return st.composite(
        lambda draw: segment(Choices.from_draw(draw, WORD), data, max_writes=max_writes))()


def valid_inputs(*, versions: Sequence[Version] = VERSIONS) -> st.SearchStrategy[FuzzInput]:
    """A short well-formed session after the handshake; its last frame asks a RECEIPT."""
    chosen = _versions(versions)
    return st.composite(lambda draw: valid_input(Choices.from_draw(draw, WORD), chosen))()


def mutated_inputs(*, versions: Sequence[Version] = VERSIONS,
                   names: Sequence[str] | None = None) -> st.SearchStrategy[FuzzInput]:
    """Inputs that each break one rule: of the mutations `names` (default all) that
    apply to one of `versions`."""
    chosen_versions = _versions(versions)
    chosen = weighted(chosen_versions, names)
    return st.composite(lambda draw: mutated_input(Choices.from_draw(draw, WORD),
                                                   chosen_versions, chosen))()


def fuzz_inputs(*, versions: Sequence[Version] = VERSIONS) -> st.SearchStrategy[FuzzInput]:
    """What a campaign sends: a valid session one time in three, else a mutation."""
    chosen_versions = _versions(versions)
    chosen = weighted(chosen_versions)
    return st.composite(lambda draw: fuzz_input(Choices.from_draw(draw, WORD),
                                                chosen_versions, chosen))()
