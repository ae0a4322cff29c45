"""An offline synthetic world for `SearchQA-Synthetic-v0`: fictional entities, encyclopedia passages and
multi-hop questions whose answers no language model can know from memory.

The world
---------
`SyntheticWorld.generate(WorldConfig(...))` draws, from one seeded `numpy` Generator, a set of fictional
entities of four types:

- **person** (kind `person`): a given name and a surname ("Maren Quist"), a birth year, an occupation;
- **place**: cities ("Port Halvex") and the countries that contain them ("Xalvia", alias "Republic of
  Xalvia");
- **organisation**: companies ("Orvane Telluric Works", often with an acronym alias), universities,
  publishing houses, film studios and record labels;
- **work**: books, films and albums ("The Glass Meridian").

Names are built from syllables (plus, for works, a fixed English vocabulary), are unique, and no two names
share the same set of content words, so a name identifies its entity even to a bag-of-words retriever.

Entities are linked by typed relations, each with a subject and an object entity:

=================  ====================  =====================  =========================================
relation           subject               object                 cardinality
=================  ====================  =====================  =========================================
born_in            person                city                   exactly one
employer           person                organisation           zero, one or two (two: ambiguous)
educated_at        person                university             zero or one
spouse             person                person                 zero or one (symmetric)
founded            person                organisation           zero or more (inverse of founded_by)
headquartered_in   organisation          city                   exactly one
founded_by         organisation          person                 exactly one
created_by         book / film / album   person                 exactly one (author / director / artist)
published_by       book / film / album   publisher / studio /   exactly one
                                         label
located_in         city                  country                exactly one
capital            country               city                   zero or one
mayor              city                  person                 zero or one (no person is mayor twice)
=================  ====================  =====================  =========================================

A share of the entities (`WorldConfig.distractor_rate`) are *twins*: entities of the same kind whose
names are confusable with another's (one vowel changed, a shared surname, the same organisation name with
another suffix, a title with one word swapped) but whose facts are drawn independently, so retrieval has
to match names exactly.

Passages
--------
Each entity has `passages_per_entity` passages (default 3), doc ids `f"{entity_id}-{k}"`, title = the
entity's name, about 45 to 110 words each (all passages of one entity close to one drawn length). Every
relation of an entity is stated in exactly one of its passages (`SyntheticWorld.fact_doc`); that fact
sentence contains the relation's *keyword* (`born`, `founder`, `headquarters`, ...) and no other passage of
the entity does (unless the world has decoys, below). The rest of the text is filler that states
nothing a question asks about. Every passage of an entity names it the same number of times (title plus
one mention), so a lexical query "<name> <keyword>" ranks the fact's passage first among the entity's
passages; the oracle trajectory relies on this.

Questions
---------
`SyntheticWorld.questions(QuestionConfig(...))` walks chains of 1 to 4 relations from a named start
entity; each relation on the chain must have exactly one object for its subject (so the answer is unique)
and no entity repeats; a subject with two objects (a person with two employers, a founder of several
organisations) is never asked about through that relation. Hidden intermediate entities are described
through the template tables of `templates` (`DESCRIBE`, `ASK`), e.g. "In which country is the city where the
author of the novel 'Tide of Ash' was born?". Start entities are partitioned once per world
(`WorldConfig.test_fraction`), so train and test questions never start from the same entity.

Gold annotations (`QARecord`):

- `gold_entities`: names of the entities the chain reaches after the start, in hop order, ending with the
  answer. The start entity is *not* included: it is written in the question, so every rollout "finds" it
  and it carries no credit signal for E-GRPO-style entity matching. It is kept in
  `metadata["path_names"][0]`.
- `gold_docs`: for hop i, the id of the passage of the hop's subject that states the hop's fact.
- `gold_titles`: the titles of those passages (the subjects' names).
- `metadata`: `chain` (relation names), `split`, `path_ids` / `path_names` / `path_kinds` (start first),
  `world_seed`, `question_seed`.

Options that give a method's mechanism room
-------------------------------------------
Each is off by default; a world or question set without them is byte for byte what it was before they
existed (their draws come from random streams of their own).

- `WorldConfig.validation_fraction`: a validation split, the start entities after the test split's in the
  split order (taken from the train ones): questions to choose a setting on, disjoint from train and test;
  `QuestionConfig(split="validation")`.
- `WorldConfig.decoy_rate`: that share of the facts get a decoy sentence (`filler.DECOYS`) in every other
  passage of their subject, holding the relation's keyword and stating nothing. "<name> <keyword>" then
  matches all of the subject's passages alike; the fact's passage stays in a small candidate pool but is
  no longer reliably first (retrieval as the bottleneck a ranker can relieve; the oracle trajectory's
  lexical query no longer reaches the fact by itself).
- `QuestionConfig.aside_rate`: that share of the questions open with an aside, another fact of the start
  entity off the chain (`templates.ASIDES`); their oracle trajectory searches the aside's entity first, a
  round that contributes nothing (`metadata["aside"]`).

Size: `passages = num_entities * passages_per_entity` exactly; `WorldConfig.for_passages(100_000)` gives
the smallest world with at least that many passages (33,334 entities at 3 per entity).

Everything is drawn from `np.random.default_rng` streams keyed by the seeds; nothing depends on
`hash()`, set iteration order or global random state, so a config gives byte-identical output in any
process.

Modules
-------
The public names are re-exported here; everything with a leading underscore is private to the
package. Imports run one way, top to bottom:

- `config`: `WorldConfig`, `QuestionConfig` and their validation;
- `draws`: the seeded random streams;
- `templates`: entity kinds, relations, relation keywords, fact sentences and question phrasings;
- `filler`: passage text that states no fact;
- `entities`: `Entity`, `EntityTable`;
- `names`: fictional words, names, twins and aliases;
- `passages`: the passages of each entity;
- `builder`: draws a world (names, relations and attributes, passages, split);
- `questions`: chain walks, `QARecord`s, `oracle_query` and `oracle_trajectory`;
- `world`: `SyntheticWorld` and `make_synthetic`.
"""

from __future__ import annotations

# MIN_ENTITIES, MAX_ENTITIES and relation_keyword are public but, as before the split, not in `__all__`.
from searchgym.data.synthetic.config import MAX_ENTITIES as MAX_ENTITIES
from searchgym.data.synthetic.config import MIN_ENTITIES as MIN_ENTITIES
from searchgym.data.synthetic.config import QuestionConfig, WorldConfig
from searchgym.data.synthetic.entities import Entity, EntityTable
from searchgym.data.synthetic.questions import oracle_query, oracle_trajectory
from searchgym.data.synthetic.templates import RELATIONS
from searchgym.data.synthetic.templates import relation_keyword as relation_keyword
from searchgym.data.synthetic.world import SyntheticWorld, make_synthetic

__all__ = [
    "RELATIONS",
    "Entity",
    "EntityTable",
    "QuestionConfig",
    "SyntheticWorld",
    "WorldConfig",
    "make_synthetic",
    "oracle_query",
    "oracle_trajectory",
]
