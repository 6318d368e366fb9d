"""The rules that read and write memory's words, without a model: what a meaningful term is (`text`), what a
change is (`changes`), how a fact rests on the turns that state it (`grounding`) and what a roll-up says
(`digests`). Core rules: recall, consolidation and forgetting read the same ones."""
