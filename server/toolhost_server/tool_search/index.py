"""The ranked half of the tool search: BM25 over each tool's name, display name, description and tags, the
fields weighted (a term in the name counts more than one in the description), in an inverted index per snapshot.

A reload must cost what it changed (bench/findings/catalog_scale.md: one changed file of 10,000 in under
100 ms), so a snapshot's index is the previous one's with only the changed tools' postings redone: a tool keeps
its terms and its document number while its spec is the same object (the catalog reader reuses the spec of an
unchanged file), and the postings of the terms no changed tool holds are shared, never copied. Each posting
keeps a term's weighted count in the tool and the tool's length; BM25's weights, which depend on the tool
count, the mean length and how many tools hold a term, are computed by the query over the tools the caller
sees (a Visible), so that a score says nothing about the tools hidden from it. bench/findings/tool_search.md
compares this with bm25s and rank_bm25 on the labelled queries and at 10,000 tools.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter

from ..model import ToolSpec
from .terms import terms

# BM25's usual constants: k1 how fast repeats of a term stop adding, b how much a long text is discounted.
K1 = 1.2
B = 0.75
# How much a term counts in each field: the name says what a tool is; tags and the display name nearly so.
FIELD_WEIGHTS: Mapping[str, float] = {"name": 3.0, "display_name": 1.0, "tags": 2.0, "description": 1.0}


@dataclass(frozen=True, slots=True)
class _Document:
    """One tool as the index holds it: its distinct terms with their weighted counts, and its length (the sum
    of the counts). Arrays, not a dict: 10,000 tools' dicts alone took 25 MiB."""

    name: str
    spec: ToolSpec
    terms: tuple[str, ...]
    frequencies: array[float]
    length: float


def tool_document(spec: ToolSpec, weights: Mapping[str, float] = FIELD_WEIGHTS) -> _Document:
    """A tool's terms, each counted with its field's weight."""
    counts: dict[str, float] = {}
    fields = {"name": [spec.name], "display_name": [spec.display_name], "tags": spec.tags,
              "description": [spec.description]}
    for field, texts in fields.items():
        weight = weights[field]
        for text in texts:
            for term in terms(text):
                counts[term] = counts.get(term, 0.0) + weight
    return _Document(spec.name, spec, tuple(counts), array("f", counts.values()), float(sum(counts.values())))


@dataclass(frozen=True, slots=True)
class Visible:
    """The tools one search ranks, and BM25's statistics over them alone: their count and summed length. A
    term's tool count is taken over `members` as the query walks the term's postings."""

    # By document number, 1 for a tool in the set; None: every tool of the index.
    members: bytearray | None
    count: int
    length: float


class RankedIndex:
    """The BM25 index of one snapshot's tools; `top` answers a query. Built from the previous snapshot's,
    redoing only the postings of the terms of the tools added, removed or changed."""

    # Past this share of tools changed, building everything anew is cheaper than patching.
    _REBUILD_SHARE = 0.25

    def __init__(self, specs: Iterable[ToolSpec], previous: RankedIndex | None = None) -> None:
        old = previous._documents if previous is not None else {}
        old_numbers = previous._numbers if previous is not None else {}
        self._next: int = previous._next if previous is not None else 0
        self._documents: dict[int, _Document] = {}
        # id(spec) -> its document number, to find the same spec in the next snapshot.
        self._numbers: dict[int, int] = {}
        added: list[int] = []
        for spec in specs:
            number = old_numbers.get(id(spec))
            if number is None or old[number].spec is not spec:
                number = self._next
                self._next += 1
                self._documents[number] = tool_document(spec)
                added.append(number)
            else:
                self._documents[number] = old[number]
            self._numbers[id(spec)] = number
        removed = [number for number in old if number not in self._documents]
        self._length = math.fsum(d.length for d in self._documents.values())
        self._by_name = {document.name: number for number, document in self._documents.items()}
        self.everything = Visible(None, len(self._documents), self._length)
        """Every tool: the view of a caller who sees all, through no filter."""
        if previous is None or len(added) + len(removed) > self._REBUILD_SHARE * max(len(self._documents), 1):
            self._postings = _postings(self._documents, self._documents)
        else:
            self._postings = _patched(previous._postings, old, removed, self._documents, added)

    def __len__(self) -> int:
        return len(self._documents)

    def visible(self, names: Iterable[str]) -> Visible:
        """The view of the tools named (names the index does not hold are left out). The length is summed
        exactly, so that two views of the same tools agree to the last bit whatever else the index holds."""
        members = bytearray(self._next)
        lengths: list[float] = []
        for name in names:
            number = self._by_name.get(name)
            if number is not None and not members[number]:
                members[number] = 1
                lengths.append(self._documents[number].length)
        return Visible(members, len(lengths), math.fsum(lengths))

    def shows(self, visible: Visible, name: str) -> bool:
        """Whether the tool `name` is one of `visible`'s."""
        members = visible.members
        if members is None:
            return True
        number = self._by_name.get(name)
        return number is not None and members[number] == 1

    def top(self, query: str, count: int, visible: Visible, excluded: str = "") -> list[tuple[str, float]]:
        """At most `count` (name, score) of the `visible` tools but `excluded` that share a term with `query`,
        best first; scores in (0, 1), higher for a better match, and computed from the visible tools alone."""
        tools = visible.count
        if not tools or count <= 0:
            return []
        members = visible.members
        # BM25: idf * f * (k1 + 1) / (f + k1 * (1 - b + b * length / mean length)).
        base, per_length = K1 * (1.0 - B), K1 * B * tools / (visible.length or 1.0)
        scores: dict[int, float] = {}
        get = scores.get
        for term in dict.fromkeys(terms(query)):
            posting = self._postings.get(term)
            if posting is None:
                continue
            numbers, frequencies, lengths = posting
            held = len(numbers) if members is None else sum(map(members.__getitem__, numbers))
            if not held:
                continue
            # Lucene's idf, never negative: a term in most tools still counts a little.
            weight = math.log(1.0 + (tools - held + 0.5) / (held + 0.5)) * (K1 + 1.0)
            for number, frequency, length in zip(numbers, frequencies, lengths, strict=True):
                if members is None or members[number]:
                    scores[number] = get(number, 0.0) + weight * frequency / (frequency + base + per_length * length)
        documents = self._documents
        found: list[tuple[str, float]] = []
        # One more than asked for, in case it holds the excluded tool (an intent's match, shown first).
        for number, score in heapq.nlargest(count + 1, scores.items(), key=itemgetter(1)):
            name = documents[number].name
            if name != excluded:
                # Squashed below 1, where an intent's match scores (intents.INTENT_SCORE); the order stays.
                found.append((name, score / (score + 1.0)))
                if len(found) == count:
                    break
        return found


# term -> (document numbers, the term's weighted count in each, each document's length), in arrays: a catalog
# of 10,000 tools holds hundreds of thousands of postings, which as tuples would take ten times the memory.
_Posting = tuple["array[int]", "array[float]", "array[float]"]


def _postings(documents: Mapping[int, _Document], including: Iterable[int]) -> dict[str, _Posting]:
    postings: dict[str, _Posting] = {}
    for number in including:
        _add(postings, number, documents[number])
    return postings


def _add(postings: dict[str, _Posting], number: int, document: _Document) -> None:
    length = document.length
    for term, frequency in zip(document.terms, document.frequencies, strict=True):
        posting = postings.get(term)
        if posting is None:
            posting = postings[term] = (array("I"), array("f"), array("f"))
        posting[0].append(number)
        posting[1].append(frequency)
        posting[2].append(length)


def _patched(postings: Mapping[str, _Posting], old: Mapping[int, _Document], removed: list[int],
             documents: Mapping[int, _Document], added: list[int]) -> dict[str, _Posting]:
    """The previous postings with the removed documents taken out and the added ones put in. The arrays of a
    term no changed tool holds are the previous snapshot's own; a touched term's are copied (at C speed) and
    patched, never changed in place, since the previous snapshot may still be searched."""
    patched = dict(postings)
    copied: set[str] = set()

    def own(term: str) -> _Posting | None:
        posting = patched.get(term)
        if posting is not None and term not in copied:
            posting = patched[term] = (array("I", posting[0]), array("f", posting[1]), array("f", posting[2]))
            copied.add(term)
        return posting

    for number in removed:
        for term in old[number].terms:
            posting = own(term)
            if posting is None:
                continue
            at = posting[0].index(number)
            for part in posting:
                del part[at]
            if not posting[0]:
                del patched[term]
    for number in added:
        for term in documents[number].terms:
            own(term)
            copied.add(term)  # a term new to the index is this snapshot's own from the start
        _add(patched, number, documents[number])
    return patched
