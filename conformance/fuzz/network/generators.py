"""What a campaign sends, as a pluggable generator: a campaign asks its generator for input
number N (from a random source seeded by the campaign's seed and N), has it run the input
against the broker, and has it say which minimised candidates are still the same input.

`grammar` (the default) draws from the grammar strategies and mutations: a valid session
one time in three, else an input that breaks one rule; one time in eight it sends an input
of the corpus again, cut into writes anew. Another generator goes into GENERATORS under
its name: it is then chosen with `stomp-conformance fuzz --generator NAME`, its findings
name it, and `replay` finds it by that name.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Protocol

from conformance.fuzz.inputs.choices import Choices
from conformance.fuzz.inputs.fuzz_input import FuzzInput
from conformance.fuzz.inputs.mutations import fuzz_input, weighted
from conformance.fuzz.inputs.rules import is_what_it_says
from conformance.fuzz.inputs.wellformed import segment
from conformance.fuzz.network.oracle import Judgement, Oracle
from conformance.spec.grammar import Version


class Generator(Protocol):
    #: names the generator in the campaign state and in each finding
    name: str

    def draw(self, rng: random.Random, corpus: Sequence[FuzzInput]) -> FuzzInput:
        """The next input, from `rng` (and the corpus, when it helps)."""
        ...

    async def run(self, oracle: Oracle, fuzz: FuzzInput) -> Judgement:
        """Send `fuzz` and judge the answer (raises oracle.Unreachable like Oracle.run)."""
        ...

    def keep(self, candidate: FuzzInput) -> bool:
        """Whether a smaller candidate is still an input of the same sort (the minimiser
        tries only those on the broker)."""
        ...


class GrammarGenerator:
    name = "grammar"

    def __init__(self, versions: Sequence[Version], mutations: Sequence[str] | None = None,
                 ) -> None:
        self.versions = tuple(versions)
        self.mutations = weighted(self.versions, mutations)

    def draw(self, rng: random.Random, corpus: Sequence[FuzzInput]) -> FuzzInput:
        c = Choices.seeded(rng)
        if corpus and c.below(8) == 0:
            again = c.pick(corpus)
            if again.version in self.versions:
                return again.with_chunks(segment(c, again.data))
        return fuzz_input(c, self.versions, self.mutations)

    async def run(self, oracle: Oracle, fuzz: FuzzInput) -> Judgement:
        return await oracle.run(fuzz)

    def keep(self, candidate: FuzzInput) -> bool:
        return is_what_it_says(candidate)


Factory = Callable[[Sequence[Version], Sequence[str] | None], Generator]
GENERATORS: dict[str, Factory] = {"grammar": GrammarGenerator}


def generator(name: str, versions: Sequence[Version],
              mutations: Sequence[str] | None = None) -> Generator:
    """The generator `name`; ValueError naming the choices when there is none."""
    if name not in GENERATORS:
        raise ValueError(f"unknown generator {name!r}: choose from {', '.join(GENERATORS)}")
    return GENERATORS[name](versions, mutations)
