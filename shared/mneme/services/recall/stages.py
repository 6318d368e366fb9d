"""The recall pipeline, listed once: search → fuse → admit → lifecycle → fallback → time → select →
prerequisites → pack.

Each stage is a small function of the `Run`, called once, in order (`STAGES`). A stage takes the
live candidates, passes some on and drops the others with a reason; `Run.note` records what it took
in, what it passed on and what it dropped. The explain trace *is* that record, so every candidate
that entered the pipeline ends either in the results or in `omitted`, exactly once.
The first five stages are here; time is in `time.py`; select, prerequisites and pack are in `select.py`.
"""

from __future__ import annotations

import contextvars
import functools
import re
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mneme.errors import MnemeError
from mneme.language import changes, questions
from mneme.language.text import meaningful_words, stem, terms
from mneme.models import Episode, Memory
from mneme.observability import logger
from mneme.ports import EpisodeStore, embed_query
from mneme.records import Fact
from mneme.search_models import Hit, has_metadata
from mneme.services.indexing import episode_text, memory_text, speaker
from mneme.services.recall import anchors as anchor_rule
from mneme.services.recall import context as recall_context
from mneme.services.recall import hop as recall_hop
from mneme.services.recall import prior as recall_prior
from mneme.services.recall import profile as recall_profile
from mneme.services.recall import scope as recall_scope
from mneme.services.recall.records import lifecycle, load, record_text, strong_text
from mneme.services.recall.run import Candidate, Run, stored_vectors, with_vectors
from mneme.services.recall.select import pack, prerequisites, select
from mneme.services.recall.time import time_stage, truth_mode
from mneme.services.recall.truth import updates as recall_updates

FRESH_LIMIT = 50  # the newest episodes the fresh tail reads from records (Serverless makes older ones visible)
FRESH_SCOPES = 8  # a subtree of at most this many scopes has its fresh tail read scope by scope
FRESH_PER_SCOPE = 10  # ... each scope's newest, at least this many (at most 80 episodes in all)
GAP_LIMIT = 5000  # the newest episodes read from records while the index is rebuilt (its lag is past a DAY)
DAY = 86400.0
MIN_VECTOR = 0.25  # balanced strictness admits vector-only episodes and facts at or above this cosine
FETCHED_BOOST = 1.05  # Engram: a memory an agent fetched in full (`ids`) ranks a little higher
FETCHED = ("", "fetched")  # (principal, session) of the per-tenant record of fetched memory ids
SPEAKER_BOOST = 1.5  # a turn spoken by a person the query names
OTHER_PERSON = 0.3  # a claim fact about another participant than the person the query asks about
OTHER_OWN = 0.5  # ... another participant's turn about their own things
ECHO = 0.5  # a claim fact that says nothing a question does not already say
WH = re.compile(r"^\W*(?:what|which|who|whom|whose|where|when|how|why)\b", re.I)
NAME_WORD = re.compile(r"[^\W_]+(?:['’]s)?")  # a query word, with its possessive
FALLBACK_WIDTH = 4  # the lexical fallback asks for this many times the channels' k
TEXT_DEPTH = 2  # the text channel asks for this many times the vector channel's k (see `search`)


Stage = Callable[[Run], None]


# -- search --------------------------------------------------------------------------------------
def search(run: Run) -> None:
    """Vector kNN and BM25 over the anchor words, under the same filters; plus the fresh tail of an
    eventually consistent index and the caller's own pending revisions. No anchors: no search.
    BM25 reads TEXT_DEPTH times deeper than kNN: a turn that shares one of the question's rarer words
    but says the rest in other words is found there, and its cosine is read from its stored vector
    (`fuse`); reading kNN deeper instead brings look-alikes that crowd out paraphrases."""
    counts: dict[str, int] = {}
    if not run.anchors:
        run.note("search", 0, [], channels=counts, skipped="no_anchors")
        return
    assert run.request.query is not None
    deps, scoring = run.deps, run.scoring
    text: Future[list[tuple[Hit, float]]] | None = None
    if scoring.alpha > 0 and scoring.beta > 0:  # the text search runs while the query is embedded
        text = _channels().submit(contextvars.copy_context().run, _lexical, run, run.k * TEXT_DEPTH)
    if scoring.alpha > 0:
        hits: list[Hit] = []
        try:
            run.query_vector = embed_query(deps.embedder, run.request.query)
            hits = deps.index.search_vector(run.flt, run.query_vector, deps.embedder.model_id, run.k)
        except MnemeError as e:
            if scoring.fallback == "never":
                raise
            run.vector_error, run.query_vector = e.code, None
            logger.warning("vector channel failed", extra={"code": e.code})
        for hit in hits:
            candidate = run.candidates.setdefault(hit.doc_id, Candidate(hit.doc_id))
            candidate.vector = max(0.0, hit.score)
            candidate.channels.add("vector")
        counts["vector"] = len(hits)
    if scoring.beta > 0:
        lexical = text.result() if text is not None else _lexical(run, run.k * TEXT_DEPTH)
        for hit, normalised in lexical:
            candidate = run.candidates.setdefault(hit.doc_id, Candidate(hit.doc_id))
            candidate.lexical, candidate.raw_bm25 = normalised, hit.score
            candidate.channels.add("lexical")
        counts["lexical"] = len(lexical)
    if deps.index.visibility_lag > 0:
        counts["fresh"] = _fresh_tail(run)
    if (run.flt.kinds is None or "memory" in run.flt.kinds) and not run.flt.metadata:  # memories carry none
        counts["revision"] = _own_revisions(run)
    run.note("search", 0, [], channels=counts, error=run.vector_error)


@functools.cache
def _channels() -> ThreadPoolExecutor:
    """Threads for a hybrid recall's text search, which runs while the query is embedded (onnxruntime
    and SQLite release the GIL: on a second core the two overlap)."""
    return ThreadPoolExecutor(max_workers=4, thread_name_prefix="recall-text")


def _lexical(run: Run, k: int) -> list[tuple[Hit, float]]:
    """BM25 hits, each with its score scaled by the top score. The raw query goes to the index: it
    drops stopwords and generic words (`mneme.language.text`) and reads date phrases; a query without anchors
    never gets here."""
    hits = run.deps.index.search_text(run.flt, run.request.query or "", k) if run.anchors else []
    top = max((hit.score for hit in hits), default=1.0) or 1.0
    return [(hit, hit.score / top) for hit in hits]


def _fresh_tail(run: Run) -> int:
    """Read-after-write over an eventually consistent index (OpenSearch Serverless has no refresh):
    score the episodes written within the index's `visibility_lag` from their records."""
    deps, flt = run.deps, run.flt
    lag = deps.index.visibility_lag
    since = deps.clock.now() - timedelta(seconds=lag)
    vector = run.query_vector
    added = 0
    limit, scopes = FRESH_LIMIT if lag < DAY else GAP_LIMIT, _fresh_scopes(run)
    if scopes is not None:  # each scope its share of the bound, and never fewer than FRESH_PER_SCOPE
        limit = max(limit // len(scopes), FRESH_PER_SCOPE)
    for episode in deps.store.list_recent_episodes(flt.tenant, since, limit, scopes):
        if episode.episode_id in run.candidates or episode.archived or not _in_filter(run, episode):
            continue
        cosine = 0.0
        if vector is not None and episode.vector is not None and episode.model_id == deps.embedder.model_id:
            cosine = max(0.0, float(np.dot(vector, np.asarray(episode.vector, dtype=np.float32))))
        overlap = anchor_rule.anchor_hits(run.anchors, episode_text(episode)) / max(len(run.anchors), 1)
        if cosine <= 0 and overlap <= 0:
            continue
        candidate = run.candidates[episode.episode_id] = Candidate(episode.episode_id, cosine, overlap)
        candidate.record = episode  # read just now, strongly consistent: `_load` does not read it again
        candidate.channels.update({"fresh", *(["vector"] if cosine else []), *(["lexical"] if overlap else [])})
        added += 1
    return added


def _fresh_scopes(run: Run) -> list[str] | None:
    """The searched subtree's scopes when it is small (at most FRESH_SCOPES, found by walking it), so
    that the fresh tail reads only their episodes and a busy scope elsewhere in the tenant neither crowds
    them out of the tail nor costs this recall reads; None (the whole tenant's newest) otherwise."""
    deps, flt = run.deps, run.flt
    if flt.ancestor_id == deps.scopes.root(flt.tenant).scope_id:
        return None
    found, stack = [flt.ancestor_id], [flt.ancestor_id]
    while stack:
        for child in deps.store.list_children(flt.tenant, stack.pop()):
            found.append(child.scope_id)
            stack.append(child.scope_id)
            if len(found) > FRESH_SCOPES:
                return None
    return found


def _in_filter(run: Run, episode: Episode) -> bool:
    flt = run.flt
    return (
        _under(run, episode.scope_id)
        and (flt.kinds is None or "episode" in flt.kinds)
        and (flt.tiers is None or episode.tier in flt.tiers)
        and (flt.since is None or episode.occurred_at >= flt.since)
        and (flt.until is None or episode.occurred_at < flt.until)
        and (flt.session_id is None or episode.session_id == flt.session_id)
        and has_metadata(episode.metadata, flt)
    )


def _under(run: Run, scope_id: str | None) -> bool:
    """Is the scope inside the searched subtree? (Tagged memories, with no scope, live at root.)"""
    if scope_id is None:
        return run.flt.ancestor_id == run.deps.scopes.root(run.flt.tenant).scope_id
    chain = run.deps.scopes.chain_of(run.flt.tenant, scope_id).chain
    return run.flt.ancestor_id in {scope.scope_id for scope in chain}


def _own_revisions(run: Run) -> int:
    """The caller's pending edits of published memories are searchable by the caller (the index
    holds the published text): score their text by anchor overlap, like the fresh tail; when the
    published text is already a candidate, the revision's words still count for it."""
    deps, flt = run.deps, run.flt
    added = 0
    run.revisions = deps.store.list_revisions(flt.tenant, author=run.caller.principal)
    edits = [revision for revision in run.revisions if "body" in revision.changes]
    memories = deps.store.get_memories(flt.tenant, [revision.memory_id for revision in edits]) if edits else {}
    for revision in edits:
        memory = memories.get(revision.memory_id)
        if memory is None or memory.status != "published" or not _under(run, memory.scope_id):
            continue
        text = memory_text(memory.model_copy(update={"body": revision.changes["body"]}))
        overlap = anchor_rule.anchor_hits(run.anchors, text) / len(run.anchors)
        found = run.candidates.get(memory.memory_id)
        if overlap > 0 and (found is None or found.lexical < overlap):
            candidate = run.candidates.setdefault(memory.memory_id, Candidate(memory.memory_id))
            candidate.lexical = overlap
            candidate.channels.update({"lexical", "revision"})
            added += found is None
    return added


# -- fuse ----------------------------------------------------------------------------------------
def fuse(run: Run) -> None:
    """Load the records (tenant and visibility checked) and combine the channels with alpha/beta."""
    took = len(run.candidates)
    dropped = _load(run, list(run.candidates.values()))
    scoring = run.scoring
    live = [c for c in run.candidates.values() if c.id not in dict(dropped)]
    names = _named_speakers(run, live)
    profile = bool(names) and recall_profile.asks(run.request.query or "")  # what is <name> like?
    added = _profile_candidates(run, names) if profile else []
    if added:
        dropped += _load(run, added)
        gone = dict(dropped)
        live += [c for c in added if c.id not in gone]
    if names:
        _without_names(run, live, names)
    if run.query_vector is not None:
        _fill_vector_scores(run, live)
    weight = (scoring.alpha if any("vector" in c.channels for c in live) else 0) + scoring.beta
    about_assistant = recall_prior.asks_about_assistant(run.request.query or "")
    wants_value = recall_prior.asks_value(run.request.query or "", truth_mode(run))
    wants_quantity = recall_prior.asks_quantity(run.request.query or "")
    wants_person = recall_prior.asks_person(run.request.query or "")
    for candidate in live:
        fused = (scoring.alpha * candidate.vector + scoring.beta * candidate.lexical) / (weight or 1)
        candidate.score = fused
        candidate.scores = {
            "vector": round(candidate.vector, 6),
            "lexical": round(candidate.lexical, 6),
            "bm25": round(candidate.raw_bm25, 6),
        }
        _resonate(run, candidate)
        _speaker(run, candidate)
        recall_prior.weigh(candidate, about_assistant)
        if wants_value:
            recall_prior.answerless(candidate, wants_person)
        if wants_quantity:
            recall_prior.quantityless(candidate)
        if profile:
            recall_profile.boost(candidate, names)
    recall_context.below_context_owners(run, live)
    others = _others(run, live)
    echoes = _echoes(run, live)
    trace = {"speakers_named": sorted(names), "profile": len(added), "other_persons_facts": others, "echoes": echoes}
    run.note("fuse", took + len(added), dropped, **{key: value for key, value in trace.items() if value})


def _profile_candidates(run: Run, names: set[str]) -> list[Candidate]:
    """The named person's turns that the profile search finds (`profile`), not yet candidates."""
    query = recall_profile.search_words(run.request.query or "", names)
    added = []
    for hit in run.deps.index.search_text(run.flt, query, recall_profile.PROFILE_HITS):
        if hit.doc_id not in run.candidates:
            candidate = run.candidates[hit.doc_id] = Candidate(hit.doc_id, channels={"profile"})
            added.append(candidate)
    return added


def _named_speakers(run: Run, candidates: list[Candidate]) -> set[str]:
    """The query's words that name a speaker of the candidates (stemmed, as anchors are)."""
    return _speakers(candidates) & run.anchors


def _speakers(candidates: Iterable[Candidate]) -> set[str]:
    """The words of the candidates' speakers (stemmed)."""
    found: set[str] = set()
    for candidate in candidates:
        who = speaker(candidate.record) if isinstance(candidate.record, Episode) else None
        if who:
            found |= terms(who)
    return found


def _without_names(run: Run, candidates: list[Candidate], names: set[str]) -> None:
    """A speaker the query names is a field, matched by the speaker rule (and by the speaker that leads
    each turn's BM25 text). Left in the query, the name dominates both channels and draws the turns that
    merely address that person ('Tom! Hi!'): so the candidates' cosines and BM25 scores are taken again
    with the query's speaker names left out (one more embedding and one more text search)."""
    assert run.request.query is not None
    rest = " ".join(
        w
        for w in NAME_WORD.findall(run.request.query)
        if stem(w.lower().replace("’", "'").removesuffix("'s")) not in names
    )
    if not meaningful_words(rest):
        return
    if run.scoring.beta > 0:
        hits = run.deps.index.search_text(run.flt, rest, run.k * TEXT_DEPTH)
        top = max((hit.score for hit in hits), default=1.0) or 1.0
        found = {hit.doc_id: hit for hit in hits}
        for candidate in candidates:
            if "lexical" in candidate.channels:
                hit = found.get(candidate.id)
                candidate.lexical, candidate.raw_bm25 = (hit.score / top, hit.score) if hit else (0.0, 0.0)
    if run.query_vector is None:
        return
    run.query_vector = embed_query(run.deps.embedder, rest)
    stored = stored_vectors(run, candidates)
    for candidate in candidates:
        cosine = _cosine(run, stored.get(candidate.id))
        if cosine is not None:
            candidate.vector = cosine


def _speaker(run: Run, candidate: Candidate) -> None:
    """A question that names a person favours that person's turns: an episode whose speaker
    (`metadata.speaker`) is among the query's anchors scores SPEAKER_BOOST times higher."""
    record = candidate.record
    who = speaker(record) if isinstance(record, Episode) else None
    if who and terms(who) & run.anchors:
        candidate.scores["speaker"] = SPEAKER_BOOST
        candidate.score *= SPEAKER_BOOST


def _others(run: Run, live: list[Candidate]) -> int:
    """A question about a person ("Which editor does Yara use?") is not answered by a claim about another
    participant of the conversation ("Aksel uses Zed."): such a fact weighs ×OTHER_PERSON
    (`scores.other_person`). A fact about someone who does not speak there (a sister, a client the turns
    name) keeps its score when the question may ask about them by relation ("Where does Tess's sister
    live?"), not when it asks about a speaker by name and no relation ("Where does Tess live?" is not
    answered by "Orla lives in Berlin."). Asked about a speaker by name, another speaker's turn about their own
    things that names no one asked about ("My new physio's called Sunita Rao", asked who Elif's is) weighs
    ×OTHER_OWN (`scores.other_own`). Returns how many facts were weighed."""
    query = run.request.query or ""
    about = questions.people(query)
    speakers = _speakers(live) if about else set()
    by_name = any(terms(one) <= speakers for one in about) and not set(meaningful_words(query)) & changes.PEOPLE
    weighed = 0
    for candidate in live:
        record = candidate.record
        if isinstance(record, Episode) and by_name and _their_own(record, about, speakers):
            candidate.scores["other_own"] = OTHER_OWN
            candidate.score *= OTHER_OWN
        if not isinstance(record, Fact) or not (owners := changes.owners(record)) or owners & about:
            continue
        people = owners - {changes.THING}  # a thing's fact ("The data pipeline uses…") is no participant's
        if speakers and (by_name or (people and all(terms(owner.split("'s ")[0]) <= speakers for owner in people))):
            candidate.scores["other_person"] = OTHER_PERSON
            candidate.score *= OTHER_PERSON
            weighed += 1
    return weighed


def _their_own(turn: Episode, about: frozenset[str], speakers: set[str]) -> bool:
    """A turn about its speaker's own things, or another participant's, naming no one asked about. A "he" or "she"
    is the one its sentence names before it besides the speakers (`_names_other`); else it may be the person asked
    about."""
    owners = changes.owners(turn)
    if changes.UNKNOWN in owners and owners - {changes.UNKNOWN} and _names_other(turn, speakers):
        owners -= {changes.UNKNOWN}
    if not owners or owners & about or owners & {changes.UNKNOWN, changes.THING}:
        return False
    named = terms(turn.content)
    return all(terms(owner) <= speakers for owner in owners) and not any(terms(one) & named for one in about)


PRONOUN = re.compile(r"\b(?:he|she)\b", re.IGNORECASE)


def _names_other(turn: Episode, speakers: set[str]) -> bool:
    """The sentence of the turn's first "he" or "she" names someone besides the conversation's speakers before it (a
    name, not a number): "I'm still seeing Tobias Lindqvist, he's fine"; not "On top of Arthur's Seat. He said…"."""
    text = changes.statement(turn)
    pronoun = PRONOUN.search(text)
    if pronoun is None:
        return False
    before = changes.sentences(text[: pronoun.start()])[-1]
    names = changes.values(before) - changes.openers(before)
    return any(not terms(name) <= speakers for name in names - changes.numbers(names))


def _echoes(run: Run, live: list[Candidate]) -> int:
    """A claim fact whose subject and value a question names already answers nothing it asks ("Harriet works
    at Lumen." for "What is Harriet's job at Lumen?"): it weighs ×ECHO (`scores.echo`). Only a question
    that asks for something (what, which, who, where, when, how, why): a search by words, or "Does Harriet
    work at Lumen?", is answered by the fact that says it. Returns how many were weighed."""
    query = run.request.query or ""
    if not WH.search(query):
        return 0
    asked = terms(query)
    weighed = 0
    for candidate in live:
        fact = candidate.record
        if not isinstance(fact, Fact) or fact.tier != "raw":
            continue
        said = terms(f"{fact.entity or ''} {fact.value or ''}")
        if said and said <= asked:
            candidate.scores["echo"] = ECHO
            candidate.score *= ECHO
            weighed += 1
    return weighed


def _load(run: Run, candidates: list[Candidate]) -> list[tuple[str, str]]:
    """The candidates' records, episodes without their vectors (`stored_vectors` reads those it needs);
    the fresh tail's episodes come with theirs. Episodes are read eventually consistent (they never change;
    on DynamoDB half the read units): an index that lags its writes may still return an episode forgotten
    within its lag, so those (`list_forgotten_since`) are dropped here, whatever a lagging read says."""
    deps, wanted = run.deps, [c.id for c in candidates if c.record is None]
    records = (
        load(deps.store, run.caller, wanted, vectors=False, revisions=run.revisions, consistent=False) if wanted else {}
    )
    gone: set[str] = set()
    if deps.index.visibility_lag > 0 and any(c.id.startswith("ep_") for c in candidates):
        since = deps.clock.now() - timedelta(seconds=min(deps.index.visibility_lag, DAY))
        gone = deps.store.list_forgotten_since(run.flt.tenant, since)
    dropped = []
    for candidate in candidates:
        candidate.record = None if candidate.id in gone else candidate.record or records.get(candidate.id)
        if candidate.record is None:
            dropped.append((candidate.id, "forgotten" if candidate.id in gone else "not_found"))
    return dropped


def _fill_vector_scores(run: Run, candidates: list[Candidate]) -> None:
    """A hit found only by BM25 gets its real cosine from the stored vector, not 0 (exact matches
    that the vector top-k missed must not be ranked below weaker hits both channels found)."""
    wanted = [c for c in candidates if "vector" not in c.channels]
    stored = stored_vectors(run, wanted)
    for candidate in wanted:
        cosine = _cosine(run, stored.get(candidate.id))
        if cosine is not None:
            candidate.vector = cosine


def _cosine(run: Run, stored: NDArray[np.float32] | None) -> float | None:
    """The query's cosine to a stored vector (floored at 0), or None without one."""
    assert run.query_vector is not None
    if stored is None:
        return None
    return max(0.0, float(np.dot(run.query_vector, stored)))


def _resonate(run: Run, candidate: Candidate) -> None:
    """Locus' resonance signal (against the node's model AVEC), added to the score with its weight."""
    avec, weight = run.request.avec, run.scoring.resonance
    if avec is None or weight <= 0 or not isinstance(candidate.record, Episode):
        return
    resonance = avec.resonance(((candidate.record.structured or {}).get("avec") or {}).get("model"))
    if resonance is not None:
        candidate.scores["resonance"] = round(resonance, 6)
        candidate.score += weight * resonance


# -- admit ---------------------------------------------------------------------------------------
def admit(run: Run) -> None:
    """The strictness rule (`admitted`): precision = Engram's anchor rule with its strong-field
    exception, balanced = a term hit or (episodes and facts) cosine ≥ MIN_VECTOR, recall = all.
    Balanced also admits a candidate linked to one of the best hits, by its vector or by a name it
    shares with them (`hop`: trace `linked`, `named`, `names`), and, for a question about the present, one
    that updates one of them (`updates`)."""
    took = len(run.candidates)
    strictness = run.scoring.strictness
    verdict = {c.id: admitted(strictness, c, run.anchors) for c in run.candidates.values()}
    rejected = [c for c in run.candidates.values() if not verdict[c.id]]
    passed = [c for c in run.candidates.values() if verdict[c.id]]
    sources, near = recall_hop.reach(run, passed, rejected, MIN_VECTOR)
    with_vectors(run, sources + near)
    links = recall_hop.link(run, sources, near)
    named: dict[str, str] = {}
    names: list[str] = []
    if recall_hop.followable(run):
        unlinked = [c for c in rejected if c.id not in links]
        named, names = recall_hop.name_links(run, passed, unlinked, _speakers(run.candidates.values()))
    unlinked = [c for c in rejected if c.id not in links and c.id not in named]
    updates = recall_updates.updating(run, passed, unlinked)
    dropped = [(c.id, f"not_admitted:{strictness}") for c in unlinked if c.id not in updates]
    trace = {"linked": links, "named": named, "names": names, "updates": updates}
    run.note("admit", took, dropped, **{key: value for key, value in trace.items() if value})


def admitted(strictness: str, candidate: Candidate, query_anchors: set[str]) -> bool:
    assert candidate.record is not None
    if strictness == "recall":
        return True
    if strictness == "precision":
        return anchor_rule.admits(query_anchors, record_text(candidate.record), strong_text(candidate.record))
    if "lexical" in candidate.channels or "profile" in candidate.channels:
        return True
    # Engram: vector hits without a term overlap never admit a memory
    return not isinstance(candidate.record, Memory) and candidate.vector >= MIN_VECTOR


# -- lifecycle -----------------------------------------------------------------------------------
def lifecycle_stage(run: Run) -> None:
    """Lifecycle factors (expired and superseded items dropped), the fetched-memory boost, then the scope
    rule: local guidance ×SCOPE_FACTOR, and no copy of guidance less local than another (`scope`)."""
    took = len(run.candidates)
    dropped = _age(run, list(run.candidates.values()))
    gone = dict(dropped)
    scope_ids = {c.record.scope_id for c in run.candidates.values() if c.record is not None and c.record.scope_id}
    run.chains = run.deps.scopes.chains_of(run.flt.tenant, sorted(scope_ids))  # a tree level a read, for all
    dropped += recall_scope.local_over_global(run, [c for c in run.candidates.values() if c.id not in gone])
    run.note("lifecycle", took, dropped)


def _age(run: Run, candidates: list[Candidate]) -> list[tuple[str, str]]:
    now = run.deps.clock.now()
    fetched = _fetched(run, candidates)
    dropped = []
    for candidate in candidates:
        assert candidate.record is not None
        factor, reason = lifecycle(candidate.record, now, run.request.as_of)
        if factor == 0:
            dropped.append((candidate.id, reason or "lifecycle"))
            continue
        candidate.scores["lifecycle"] = factor
        candidate.score *= factor
        if candidate.id in fetched:
            candidate.scores["fetched"] = FETCHED_BOOST
            candidate.score *= FETCHED_BOOST
    return dropped


def _fetched(run: Run, candidates: list[Candidate]) -> set[str]:
    if not any(isinstance(c.record, Memory) for c in candidates):
        return set()
    return run.deps.store.get_delivered(run.flt.tenant, *FETCHED)


# -- fallback ------------------------------------------------------------------------------------
def fallback(run: Run) -> None:
    """Locus' fallback: when the policy allows (always, or on_empty with nothing left, or the vector
    channel failed), a wider lexical search. Its candidates go through the same fuse, admit and
    lifecycle rules: a fallback widens the channel, never the admission rule."""
    scoring = run.scoring
    run.fallback = {
        "policy": scoring.fallback,
        "triggered": bool(run.vector_error),
        "reason": "vector_unavailable" if run.vector_error else None,
    }
    wanted = (
        run.vector_error is not None
        or scoring.fallback == "always"
        or (scoring.fallback == "on_empty" and not run.candidates)
    )
    if not wanted or not run.anchors:
        run.note("fallback", len(run.candidates), [], found=0, reconsidered=[], passed=[])
        return
    took = len(run.candidates)
    fresh: list[Candidate] = []
    reconsidered: list[str] = []  # not admitted from the main channels; the lexical channel may admit them
    for hit, normalised in _lexical(run, run.k * FALLBACK_WIDTH):
        if hit.doc_id in run.candidates:
            continue
        reason = run.omitted.get(hit.doc_id)
        if reason is not None and not reason.startswith("not_admitted"):
            continue
        if reason is not None:
            del run.omitted[hit.doc_id]
            reconsidered.append(hit.doc_id)
        candidate = Candidate(hit.doc_id, lexical=normalised, raw_bm25=hit.score, channels={"lexical"})
        candidate.origin = "fallback"
        fresh.append(candidate)
    dropped = _load(run, fresh)
    live = [c for c in fresh if c.record is not None]
    about_assistant = recall_prior.asks_about_assistant(run.request.query or "")
    for candidate in live:
        candidate.score = candidate.lexical
        candidate.scores = {"vector": 0.0, "lexical": round(candidate.lexical, 6), "bm25": round(candidate.raw_bm25, 6)}
        _speaker(run, candidate)
        recall_prior.weigh(candidate, about_assistant)
    strictness = scoring.strictness
    dropped += [(c.id, f"not_admitted:{strictness}") for c in live if not admitted(strictness, c, run.anchors)]
    gone = dict(dropped)
    dropped += _age(run, [c for c in live if c.id not in gone])
    gone = dict(dropped)
    for candidate in fresh:
        if candidate.id not in gone:
            run.candidates[candidate.id] = candidate
    if not run.fallback["triggered"]:  # it ran: say so, and why, whether or not it found anything new
        run.fallback.update(triggered=True, reason=scoring.fallback)
    passed = [c.id for c in fresh if c.id not in gone]
    run.note(
        "fallback",
        took + len(fresh),
        dropped,
        found=len(fresh) - len(reconsidered),
        reconsidered=reconsidered,
        passed=passed,
    )


STAGES: tuple[tuple[str, Stage], ...] = (
    ("search", search),
    ("fuse", fuse),
    ("admit", admit),
    ("lifecycle", lifecycle_stage),
    ("fallback", fallback),
    ("time", time_stage),
    ("select", select),
    ("prerequisites", prerequisites),
    ("pack", pack),
)
STAGE_NAMES = tuple(name for name, _ in STAGES)


def run_stages(run: Run) -> Run:
    for _, stage in STAGES:
        stage(run)
    return run


def explain(run: Run) -> dict[str, Any]:
    """The trace: the stages' own records, the filters and anchors, every omission once."""
    assert run.pack is not None
    return {
        "filters": run.flt.model_dump(mode="json", exclude={"tenant", "principal"}),
        "anchors": sorted(run.anchors),
        "stages": run.stages,
        "fallback": run.fallback,
        "omitted": [{"id": doc_id, "reason": reason} for doc_id, reason in run.omitted.items()],
        "context": {
            "expanded": run.pack.expanded,
            "cards": run.pack.cards,
            "related": run.pack.related,
            "dropped": run.pack.dropped,
            "already_loaded": run.already,
            "tokens": run.pack.tokens,
        },
    }


def record_fetched(store: EpisodeStore, tenant: str, ids: list[str]) -> None:
    """Remember which memories were fetched in full, per tenant (one row per memory id: bounded by
    the tenant's curated memories; the boost is a fixed factor, not a count)."""
    if ids:
        store.add_delivered(tenant, *FETCHED, ids)
