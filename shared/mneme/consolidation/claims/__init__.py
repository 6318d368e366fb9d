"""Claims from conversation, true as written: hand-written patterns, no model. `window` reads a window of
turns (and `claims` one turn), `turns` reads a turn down to the clauses that assert something, `rules`
holds the patterns, `values` what an entity, a property and a value may be, `answers` the claims two turns
make together (an answer to a question), `corrections` a speaker's correction or retraction."""
