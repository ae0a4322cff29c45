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
the entity does. The rest of the text is filler that states
nothing a question asks about. Every passage of an entity names it the same number of times (title plus
one mention), so a lexical query "<name> <keyword>" ranks the fact's passage first among the entity's
passages; the oracle trajectory relies on this.

Questions
---------
`SyntheticWorld.questions(QuestionConfig(...))` walks chains of 1 to 4 relations from a named start
entity; each relation on the chain must have exactly one object for its subject (so the answer is unique)
and no entity repeats; a subject with two objects (a person with two employers, a founder of several
organisations) is never asked about through that relation. Hidden intermediate entities are described
through the template tables below (`_DESCRIBE`, `_ASK`), e.g. "In which country is the city where the
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

Size: `passages = num_entities * passages_per_entity` exactly; `WorldConfig.for_passages(100_000)` gives
the smallest world with at least that many passages (33,334 entities at 3 per entity).

Everything is drawn from `np.random.default_rng` streams keyed by the seeds; nothing depends on
`hash()`, set iteration order or global random state, so a config gives byte-identical output in any
process.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

import numpy as np

from searchgym.corpus.corpus import Corpus, Document
from searchgym.data.records import QARecord
from searchgym.errors import ConfigError

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

logger = logging.getLogger(__name__)

MIN_ENTITIES = 100
"""Smallest world: below this some entity kinds would have a single member and chains dry up."""
MAX_ENTITIES = 5_000_000
_MAX_FAILED_WALKS = 20_000  # consecutive failed or repeated walks before questions() gives up

# Independent random streams, so that e.g. changing the filler text does not reshuffle the relations.
_STREAM_NAMES, _STREAM_RELATIONS, _STREAM_TEXT, _STREAM_SPLIT, _STREAM_QUESTIONS = 1, 2, 3, 4, 5

# ---------------------------------------------------------------------------------------------------------
# Entity kinds
# ---------------------------------------------------------------------------------------------------------

_KIND_TYPE: dict[str, str] = {
    "person": "person",
    "city": "place",
    "country": "place",
    "company": "organisation",
    "university": "organisation",
    "publisher": "organisation",
    "studio": "organisation",
    "label": "organisation",
    "book": "work",
    "film": "work",
    "album": "work",
}
_ORG_KINDS = ("company", "university", "publisher", "studio", "label")
_WORK_KINDS = ("book", "film", "album")

# Share of the non-twin entities per kind; persons take whatever is left (about 42%).
_KIND_SHARES: dict[str, float] = {
    "city": 0.11,
    "country": 0.012,
    "company": 0.08,
    "university": 0.03,
    "publisher": 0.025,
    "studio": 0.02,
    "label": 0.02,
    "book": 0.11,
    "film": 0.07,
    "album": 0.06,
}
_KIND_MINIMUM: dict[str, int] = {"country": 3}  # other kinds: 2

# The organisation kind that publishes each work kind.
_PUBLISHER_KIND = {"book": "publisher", "film": "studio", "album": "label"}

# How a hidden or answer entity of a kind is called in question text.
_KIND_NOUN = {
    "person": "person",
    "city": "city",
    "country": "country",
    "company": "company",
    "university": "university",
    "publisher": "publishing house",
    "studio": "film studio",
    "label": "record label",
    "book": "novel",
    "film": "film",
    "album": "album",
}

# ---------------------------------------------------------------------------------------------------------
# Relations and the template tables
# ---------------------------------------------------------------------------------------------------------

RELATIONS: tuple[str, ...] = (
    "born_in",
    "employer",
    "educated_at",
    "spouse",
    "founded",
    "headquartered_in",
    "founded_by",
    "created_by",
    "published_by",
    "located_in",
    "capital",
    "mayor",
)
"""Every relation name, in a fixed order."""

_RELATIONS_OF: dict[str, tuple[str, ...]] = {
    "person": ("born_in", "employer", "educated_at", "spouse", "founded"),
    "city": ("located_in", "mayor"),
    "country": ("capital",),
    **{kind: ("headquartered_in", "founded_by") for kind in _ORG_KINDS},
    **{kind: ("created_by", "published_by") for kind in _WORK_KINDS},
}

# Which of the subject's passages states each relation. Section 0 is the overview.
_FACT_SECTION: dict[str, int] = {
    "born_in": 1,
    "educated_at": 1,
    "employer": 2,
    "founded": 2,
    "spouse": 2,
    "headquartered_in": 1,
    "founded_by": 2,
    "created_by": 1,
    "published_by": 2,
    "located_in": 0,
    "capital": 0,
    "mayor": 1,
}

# Tables keyed by (relation, subject kind), with "*" as the fallback kind.
_Key = tuple[str, str]

_KEYWORD: dict[_Key, str] = {
    # The word the oracle adds to the subject's name to search for the fact. It appears in every fact
    # sentence of the relation (_FACT_TEMPLATES) and in no filler or intro text, so among the subject's
    # passages only the fact's passage matches it.
    ("born_in", "*"): "born",
    ("employer", "*"): "employer",
    ("educated_at", "*"): "educated",
    ("spouse", "*"): "spouse",
    ("founded", "*"): "founded",
    ("headquartered_in", "*"): "headquarters",
    ("founded_by", "*"): "founder",
    ("created_by", "book"): "author",
    ("created_by", "film"): "director",
    ("created_by", "album"): "artist",
    ("published_by", "book"): "publisher",
    ("published_by", "film"): "studio",
    ("published_by", "album"): "label",
    ("located_in", "*"): "country",
    ("capital", "*"): "capital",
    ("mayor", "*"): "mayor",
}

# Fact sentences. {S}: the subject (its name in a passage's first sentence, a pronoun or "It" after),
# {Poss}: its possessive at sentence start, {poss}/{pron}: lower-case possessive/pronoun, {O}: the object(s),
# {year}: the year attached to the fact. Keys with "/2" are used when the subject has two or more objects.
_FACT_TEMPLATES: dict[_Key, tuple[str, ...]] = {
    ("born_in", "*"): (
        "{S} was born in {O} in {year}.",
        "{S} was born in {O} in {year} and grew up in the same streets.",
    ),
    ("educated_at", "*"): (
        "{S} was educated at {O}, where {pron} studied {subject}.",
        "{S} was educated at {O} and graduated in {year}.",
    ),
    ("employer", "*"): (
        "{Poss} employer is {O}, where {pron} has worked since {year}.",
        "{S} works for {O}, {poss} employer since {year}.",
    ),
    ("employer/2", "*"): (
        "{S} divides {poss} time between {O}, and each has been {poss} employer for years.",
        "{S} works for both {O}; neither is {poss} sole employer.",
    ),
    ("founded", "*"): (
        "{S} founded {O} in {year}.",
        "{S} founded {O} in {year} and remained involved for years.",
    ),
    ("founded/2", "*"): ("{S} founded {O}.", "{S} founded several organisations over the years: {O}."),
    ("spouse", "*"): (
        "{S} is married to {O}, {poss} spouse since {year}.",
        "{Poss} spouse is {O}; the two married in {year}.",
    ),
    ("headquartered_in", "*"): (
        "{S} has {poss} headquarters in {O}.",
        "{Poss} headquarters have been in {O} since {year}.",
    ),
    ("founded_by", "*"): (
        "{Poss} founder, {O}, set it up in {year}.",
        "{S} was set up in {year} by {O}, {poss} founder.",
    ),
    ("created_by", "book"): (
        "{S} was written by the author {O} and first appeared in {year}.",
        "{Poss} author, {O}, completed the manuscript in {year}.",
    ),
    ("created_by", "film"): (
        "{S} was made by the director {O} and premiered in {year}.",
        "{Poss} director, {O}, shot it in {year}.",
    ),
    ("created_by", "album"): (
        "{S} was recorded by the artist {O} in {year}.",
        "{Poss} recording artist, {O}, made it in {year}.",
    ),
    ("published_by", "book"): ("{S} was issued by the publisher {O}.", "{Poss} publisher is {O}."),
    ("published_by", "film"): ("{S} was produced by the studio {O}.", "{Poss} studio was {O}."),
    ("published_by", "album"): ("{S} was released on the {O} label.", "{Poss} label is {O}."),
    ("located_in", "*"): (
        "{S} is a {city_kind} in the country of {O}.",
        "{S} is a {city_kind} located in the country of {O}.",
    ),
    ("capital", "*"): ("{Poss} capital is {O}.", "{S} is governed from {poss} capital, {O}."),
    ("mayor", "*"): (
        "{Poss} mayor is {O}, in office since {year}.",
        "{S} has been led by {poss} mayor, {O}, since {year}.",
    ),
}

# How a question names the entity a relation leads to, given the description {S} of its subject.
# "tail" forms end with {S}, so they nest to any depth ("the founder of the employer of the spouse of X").
# "inner" forms put {S} inside the phrase; they read well only when {S} is a name or a single tail phrase,
# and the generator uses them only then. {objnoun} is the object's kind noun ("company", "record label").
_DESCRIBE: dict[_Key, dict[str, tuple[str, ...]]] = {
    ("born_in", "*"): {"tail": ("the birthplace of {S}",), "inner": ("the city where {S} was born",)},
    ("employer", "*"): {"tail": ("the employer of {S}", "the {objnoun} that employs {S}"), "inner": ()},
    ("educated_at", "*"): {"tail": ("the alma mater of {S}", "the university attended by {S}"), "inner": ()},
    ("spouse", "*"): {"tail": ("the spouse of {S}", "the person married to {S}"), "inner": ()},
    ("founded", "*"): {"tail": ("the {objnoun} founded by {S}",), "inner": ()},
    ("headquartered_in", "*"): {
        "tail": ("the headquarters city of {S}",),
        "inner": ("the city where {S} is headquartered",),
    },
    ("founded_by", "*"): {"tail": ("the founder of {S}", "the person who founded {S}"), "inner": ()},
    ("created_by", "book"): {"tail": ("the author of {S}", "the person who wrote {S}"), "inner": ()},
    ("created_by", "film"): {"tail": ("the director of {S}", "the person who directed {S}"), "inner": ()},
    ("created_by", "album"): {"tail": ("the artist who recorded {S}",), "inner": ()},
    ("published_by", "book"): {"tail": ("the publisher of {S}", "the publishing house that issued {S}"), "inner": ()},
    ("published_by", "film"): {"tail": ("the studio that produced {S}",), "inner": ()},
    ("published_by", "album"): {"tail": ("the label that released {S}",), "inner": ()},
    ("located_in", "*"): {"tail": ("the country that contains {S}",), "inner": ("the country where {S} lies",)},
    ("capital", "*"): {"tail": ("the capital of {S}",), "inner": ()},
    ("mayor", "*"): {"tail": ("the mayor of {S}",), "inner": ()},
}

# The question asked about the last hop, given the description {S} of its subject; "tail" and "inner" as
# in _DESCRIBE.
_ASK: dict[_Key, dict[str, tuple[str, ...]]] = {
    ("born_in", "*"): {"tail": ("What is the birthplace of {S}?",),
                       "inner": ("Where was {S} born?", "In which city was {S} born?")},
    ("employer", "*"): {"tail": ("Who is the employer of {S}?", "Which {objnoun} employs {S}?"),
                        "inner": ("Which {objnoun} does {S} work for?",)},
    ("educated_at", "*"): {"tail": ("What is the alma mater of {S}?", "Which university did {S} attend?"),
                           "inner": ("Where was {S} educated?",)},
    ("spouse", "*"): {"tail": ("Who is the spouse of {S}?",), "inner": ("Who is {S} married to?",)},
    ("founded", "*"): {"tail": ("What is the name of the {objnoun} founded by {S}?",),
                       "inner": ("Which {objnoun} did {S} found?",)},
    ("headquartered_in", "*"): {"tail": ("Where are the headquarters of {S}?",),
                                "inner": ("In which city is {S} headquartered?",)},
    ("founded_by", "*"): {"tail": ("Who founded {S}?", "Who is the founder of {S}?"), "inner": ()},
    ("created_by", "book"): {"tail": ("Who wrote {S}?", "Who is the author of {S}?"), "inner": ()},
    ("created_by", "film"): {"tail": ("Who directed {S}?", "Who is the director of {S}?"), "inner": ()},
    ("created_by", "album"): {"tail": ("Who recorded {S}?", "Which artist recorded {S}?"), "inner": ()},
    ("published_by", "book"): {"tail": ("Which publishing house issued {S}?", "Who is the publisher of {S}?"),
                               "inner": ()},
    ("published_by", "film"): {"tail": ("Which studio produced {S}?",), "inner": ()},
    ("published_by", "album"): {"tail": ("Which record label released {S}?",),
                                "inner": ("On which label was {S} released?",)},
    ("located_in", "*"): {"tail": ("Which country contains {S}?",),
                          "inner": ("In which country is {S}?", "In which country does {S} lie?")},
    ("capital", "*"): {"tail": ("What is the capital of {S}?", "Which city is the capital of {S}?"), "inner": ()},
    ("mayor", "*"): {"tail": ("Who is the mayor of {S}?", "Who serves as mayor of {S}?"), "inner": ()},
}

# How the question names the start entity, by kind.
_START_REF: dict[str, str] = {"book": "the novel '{N}'", "film": "the film '{N}'", "album": "the album '{N}'"}


def _lookup(table: Mapping[_Key, Any], relation: str, kind: str) -> Any:
    if (relation, kind) in table:
        return table[(relation, kind)]
    return table[(relation, "*")]


def relation_keyword(relation: str, subject_kind: str) -> str:
    """The word that, with the subject's name, retrieves the passage stating `relation`."""
    return _lookup(_KEYWORD, relation, subject_kind)


# ---------------------------------------------------------------------------------------------------------
# Name material
# ---------------------------------------------------------------------------------------------------------

# Syllable parts, repeated to weight them: mostly single consonants and plain vowels, a few clusters.
_ONSETS = ("b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z") * 3 + (
    "br", "dr", "gr", "kr", "tr", "st", "th", "sh", "ch", "vr", "qu", "", "", "", "", "")
_NUCLEI = ("a", "e", "i", "o", "u") * 3 + ("a", "e", "o", "ai", "ei", "ou", "au")
_MEDIAL_CODAS = ("",) * 8 + ("n", "r", "l", "s")
_FINAL_CODAS = ("", "", "", "n", "r", "l", "s", "x", "m", "nd", "rn", "st", "th", "v", "rd", "lt", "sk")
_VOWELS = "aeiou"
_BAD_CLUSTER = re.compile(r"[^aeiouy]{3}|[aeiouy]{3}|(.)\1\1|quu|^[^aeiouy]{2}[^aeiouyrlh]")

_CITY_PREFIXES = ("Port", "New", "Fort", "Saint", "Upper", "Lower", "East", "West", "North", "South", "Old",
                  "Mount", "Lake")
_COUNTRY_SUFFIXES = ("ia", "ania", "and", "ora", "esh", "ar", "ovia", "ene", "mark")
_COUNTRY_FORMS = ("Republic", "Kingdom", "Federation", "Commonwealth", "Grand Duchy", "Union")
_ORG_SUFFIXES: dict[str, tuple[str, ...]] = {
    "company": ("Works", "Industries", "Holdings", "Group", "Foundry", "Trading Company", "Mills", "Dynamics",
                "Shipping", "Laboratories", "Manufacturing", "Ironworks"),
    "publisher": ("Press", "House", "Books", "Editions"),
    "studio": ("Pictures", "Studios", "Films", "Cinema"),
    "label": ("Records", "Sound", "Music", "Recordings"),
}
_UNIVERSITY_PATTERNS = ("{A} University", "University of {A}", "{A} Institute of Technology", "{A} College",
                        "{A} Polytechnic")
_ADJECTIVAL_ENDINGS = ("ic", "ian", "ine", "ar", "al")

# English title vocabulary: no stop words, no relation keywords.
_TITLE_ADJECTIVES = (
    "Silent", "Glass", "Hollow", "Crimson", "Distant", "Broken", "Golden", "Winter", "Hidden", "Amber", "Iron",
    "Burning", "Pale", "Wandering", "Sunken", "Forgotten", "Northern", "Velvet", "Bitter", "Endless", "Scarlet",
    "Silver", "Drowned", "Sleeping", "Lonely", "Wild", "Secret", "Ashen", "Emerald", "Shattered", "Twilight",
    "Evening", "Midnight", "Brass", "Marble", "Gentle", "Hungry", "Lucky", "Blind", "Gilded", "Feral", "Woven",
    "Borrowed", "Nameless",
)
_TITLE_NOUNS = (
    "Meridian", "Harbour", "Lantern", "Orchard", "Tide", "Mirror", "Garden", "Tower", "Compass", "Feather", "Ash",
    "Ember", "Atlas", "Voyage", "Shore", "Island", "Window", "Clock", "Letter", "Map", "Storm", "Valley", "Crown",
    "Thread", "Bell", "Shadow", "Circle", "Gate", "Road", "Sparrow", "Raven", "Heron", "Wolf", "Fox", "Lighthouse",
    "Canal", "Carnival", "Orchestra", "Horizon", "Equinox", "Solstice", "Monsoon", "Glacier", "Quarry", "Furnace",
    "Harvest", "Cellar", "Attic", "Balcony", "Tapestry", "Mosaic", "Prism", "Cipher", "Labyrinth", "Pilgrim",
    "Widow", "Cartographer", "Alchemist", "Weaver", "Ferryman", "Orchid", "Comet", "Anchor", "Candle", "Violin",
    "Tunnel", "Meadow", "Willow", "Citadel", "Pendulum", "Beacon", "Chimney", "Lagoon", "Falcon", "Almanac",
    "Ledger", "Serenade",
)
_TITLE_WORDS = frozenset(w.lower() for w in _TITLE_ADJECTIVES + _TITLE_NOUNS)
# Words of names that are not fictional, so a one-vowel twin never mutates them.
_FIXED_NAME_WORDS = frozenset(
    {"The", "of", "University", "Institute", "Technology", "College", "Polytechnic", *_CITY_PREFIXES,
     *_TITLE_ADJECTIVES, *_TITLE_NOUNS,
     *(word for suffixes in _ORG_SUFFIXES.values() for suffix in suffixes for word in suffix.split())}
)

_TOKEN = re.compile(r"(?u)\b\w\w+\b")
# bm25s's English stop words; names are compared without them.
_STOPWORDS = frozenset((
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with",
))
_KEYWORDS = frozenset(_KEYWORD.values())


def _content_tokens(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in _STOPWORDS]


def _name_key(name: str) -> str:
    """Names with equal keys are indistinguishable to a bag-of-words retriever."""
    return " ".join(sorted(set(_content_tokens(name))))


# ---------------------------------------------------------------------------------------------------------
# Filler text (states nothing any question asks about; never contains a relation keyword)
# ---------------------------------------------------------------------------------------------------------

_SLOTS: dict[str, tuple[str, ...]] = {
    "temper": ("quiet", "restless", "patient", "sharp", "generous", "reserved", "cheerful", "stubborn"),
    "topic": ("river trade", "early printing", "coastal birds", "folk music", "bridge design", "old maps",
              "weather records", "local dialects", "lens grinding", "public health", "rail timetables",
              "medieval law", "star charts", "textile dyes"),
    "collectible": ("old coins", "pressed flowers", "pocket watches", "sea charts", "postage stamps",
                    "antique keys", "hand-painted tiles"),
    "direction": ("north", "south", "east", "west", "north-east", "south-west"),
    "hobby": ("sailor", "chess player", "mountain walker", "cyclist", "amateur astronomer", "fisher",
              "gardener"),
    "decade": ("1870s", "1880s", "1890s", "1900s", "1910s", "1920s", "1930s", "1950s", "1960s", "1970s", "1980s"),
    "decade_late": ("1980s", "1990s", "2000s", "2010s"),
    "century": ("twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth", "eighteenth"),
    "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"),
    "small_num": ("three", "four", "five", "six", "seven", "eight", "nine", "eleven", "twelve"),
    "landscape": ("low wooded hills", "salt marshes", "terraced vineyards", "wide grain fields",
                  "pine woods", "limestone cliffs", "peat bogs"),
    "industry": ("fishing", "timber", "wool", "brewing", "pottery", "shipbuilding", "paper making"),
    "adj_place": ("crooked", "colourful", "well preserved", "busy", "quiet", "picturesque"),
    "climate": ("temperate", "dry", "humid", "cool", "mild maritime", "continental"),
    "export": ("wool", "olive oil", "porcelain", "dried fish", "timber", "clocks", "wine", "copper"),
    "flag": ("a white bird on a blue field", "three horizontal bands", "a yellow wheel", "a green cross",
             "two crossed oars", "a red star above a river"),
    "colour": ("green", "blue", "red", "black", "yellow", "grey", "purple"),
    "growth_cause": ("a new railway line", "cheap river transport", "a wartime contract", "foreign investment",
                     "a few loyal customers", "a generous bequest"),
    "critique": ("pricing", "working conditions", "secrecy", "slow decision making", "expansion plans"),
    "setting": ("small fishing town", "mountain village", "crowded port", "manor house", "border town",
                "river barge", "snowbound inn"),
    "protagonist": ("a retired clockmaker", "two sisters", "a young surveyor", "a travelling doctor",
                    "a ferry pilot", "an exiled chemist", "a family of weavers"),
    "adj_art": ("spare", "luminous", "restless", "intimate", "austere", "playful"),
    "cover": ("a ship at dusk", "an empty chair", "a flock of starlings", "a hand-drawn chart",
              "a frozen lake", "a red door"),
    "subject": ("law", "medicine", "chemistry", "history", "engineering", "philosophy", "mathematics",
                "economics", "music", "literature"),
    "uni_adj": ("public research", "private", "technical", "small liberal arts", "state"),
    "sector": ("shipbuilding", "textile", "railway engineering", "glassmaking", "mining", "pharmaceutical",
               "lens making", "clockmaking", "brewing", "shipping", "steel", "printing machinery"),
    "book_genre": ("mystery", "historical", "science fiction", "gothic", "comic", "seafaring", "literary"),
    "film_genre": ("drama", "thriller", "comedy", "western", "musical", "crime", "war"),
    "album_genre": ("jazz", "folk", "rock", "blues", "synth-pop", "soul", "chamber pop"),
    "city_kind": ("city", "port city", "market town", "river town", "mountain town", "city"),
}
_NUMERIC_SLOTS: dict[str, tuple[int, int, int]] = {
    # name: (low, high, step) of a uniformly drawn number
    "population": (8_000, 900_000, 1_000),
    "year_c": (1790, 1985, 1),
    "year_r": (1900, 2015, 1),
    "height": (1_200, 4_800, 10),
    "pages": (150, 720, 10),
    "minutes": (82, 168, 1),
    "tracks": (7, 16, 1),
    "students": (2_000, 40_000, 500),
}

_INTROS: dict[str, tuple[str, ...]] = {
    "person": ("{S} is {a_occupation} whose career spanned several decades.",
               "{S} is {a_occupation} with a long and varied career.",
               "{S} is a widely respected {occupation}."),
    "country": ("{S}, officially the {formal}, is a sovereign state in the {direction} of the continent.",),
    "company": ("{S} is a {sector} company.", "{S} is a {sector} business with a long history."),
    "university": ("{S} is a {uni_adj} university.",),
    "publisher": ("{S} is a publishing house specialising in {book_genre} books.",),
    "studio": ("{S} is a film production company.", "{S} is a production company known for {film_genre} films."),
    "label": ("{S} is a record company known for {album_genre} releases.",),
    "book": ("{S} is a {book_genre} novel from {year}.",),
    "film": ("{S} is a {film_genre} film from {year}.",),
    "album": ("{S} is a {album_genre} album from {year}.",),
}

_FILLERS: dict[str, tuple[str, ...]] = {
    "person": (
        "{S} was known among colleagues for a {temper} temperament and a dry sense of humour.",
        "{S} kept detailed notebooks on {topic}, which were later given to a regional archive.",
        "{S} travelled widely as a young adult and described the journeys in long letters to friends.",
        "{S} gave a well attended series of public lectures on {topic} in the {decade}.",
        "{S} was an avid collector of {collectible}.",
        "{S} received several civic honours late in life.",
        "{S} spent long summers in the hill villages of the {direction}.",
        "{S} corresponded for decades with scholars interested in {topic}.",
        "{S} learned three languages as a child and later translated short texts for local newspapers.",
        "{S} was a keen {hobby} and belonged to a local club for many years.",
        "{S} rarely gave interviews and preferred to let the work speak for itself.",
        "{S} served for a time on the board of a small charitable trust.",
        "{S} suffered a long illness in middle age but returned to public life afterwards.",
        "{S} was portrayed in a stage play in the {decade} that drew large audiences.",
        "{S} is often cited in histories of {topic}.",
        "{S} gave a large part of {poss} private library to a public reading room.",
        "{Poss} letters, collected by friends, fill four volumes.",
        "{Poss} notes on {topic} remain unpublished.",
        "Contemporaries described {obj} as {temper} but deeply loyal to old friends.",
        "Several portraits of {obj} survive in private collections.",
        "A full biography of {obj} appeared in the {decade} and was widely reviewed.",
        "Friends remembered {poss} habit of walking for hours before breakfast.",
        "Much of {poss} later life was spent in a modest house near the sea.",
        "A small street was named in {poss} honour in the {decade}.",
    ),
    "city": (
        "{S} has a population of about {population} people.",
        "{S} is known for {poss} {adj_place} old quarter and narrow streets.",
        "{S} lies on the banks of a slow river that floods most springs.",
        "{S} holds a large open market every {weekday}.",
        "{S} has an old stone bridge dating from the {century} century.",
        "{S} is served by a regional railway line and a network of local buses.",
        "{S} has a mild climate, with wet winters and warm, dry summers.",
        "{S} grew rapidly in the {decade} as workers arrived from the surrounding villages.",
        "{S} is home to a small museum of local history.",
        "{S} holds a music festival every year.",
        "{S} is divided into {small_num} districts, each with its own council.",
        "{S} has several parks laid out along the line of its former walls.",
        "{S} suffered a serious fire in the {decade}, after which much of the centre was rebuilt.",
        "{S} is surrounded by {landscape}.",
        "{S} keeps friendly ties with several towns abroad.",
        "{Poss} cathedral took almost a century to complete.",
        "Local industry includes {industry} and a number of small workshops.",
        "Its docks were enlarged twice in the {century} century.",
        "The old town hall now houses a public library.",
        "Visitors often remark on the {adj_place} light of the evenings.",
        "Its main square is lined with cafes and arcades.",
        "{S} has a busy quarter full of bookshops.",
        "{S} is known for {poss} tiled roofs and painted shutters.",
        "{S} has a botanical park laid out in the {decade}.",
        "{S} was largely spared by the wars of the {decade}.",
        "{S} has a football club with a loyal following.",
        "{S} is linked to nearby towns by a ferry service.",
        "The local dialect differs noticeably from the standard language.",
        "Its oldest church dates from the {century} century.",
        "Many of its houses are built from local yellow brick.",
        "The surrounding farmland produces grain, fruit and wine.",
    ),
    "country": (
        "{S} has a long coastline dotted with fishing villages.",
        "{S} relies on {industry} and farming for most of {poss} export income.",
        "{S} is governed under a constitution adopted in {year_c}.",
        "{S} has a {climate} climate with marked seasonal rains.",
        "{S} is divided into {small_num} provinces.",
        "{S} maintains a small professional army and a coast guard.",
        "{S} has two official languages.",
        "{S} is known abroad for {poss} {export}.",
        "{S} joined several regional trade agreements in the {decade}.",
        "{S} has a national railway network that links the main towns.",
        "{S} holds parliamentary elections every four years.",
        "{S} went through a period of unrest in the {decade}.",
        "{Poss} highest peak rises above {height} metres.",
        "{Poss} national library holds a large collection of early printed books.",
        "Its currency is divided into one hundred smaller units.",
        "Much of the interior is covered by {landscape}.",
        "The national flag shows {flag}.",
        "Its population has grown steadily since the {decade}.",
        "{S} has a lively tradition of folk dance.",
        "{S} is crossed by {small_num} major rivers.",
        "{S} hosts an international chess tournament every spring.",
        "{S} abolished the death penalty in {year_c}.",
        "Its cuisine is known for slow-cooked stews and flatbreads.",
        "Its national anthem was adopted in the {decade}.",
    ),
    "organisation": (
        "{S} has several hundred staff across a number of sites.",
        "{S} prints an annual report on {poss} activities.",
        "{S} went through a difficult period in the {decade} before recovering.",
        "{S} keeps a small archive of early documents and photographs.",
        "{S} sponsors a yearly prize for young professionals.",
        "{S} underwent a major reorganisation in {year_r}.",
        "{S} is known for {poss} distinctive {colour} emblem.",
        "{S} has been the subject of several studies of institutional history.",
        "{S} opened a second site in the {decade}.",
        "{S} is governed by a board of {small_num} members.",
        "{S} has close ties with several regional schools.",
        "{S} was briefly under public ownership in the {decade}.",
        "{Poss} main building is a listed landmark.",
        "{Poss} motto, in an old local dialect, roughly means 'steady hands'.",
        "Its early growth owed much to {growth_cause}.",
        "A fire in the {decade} destroyed part of its archive.",
        "Its staff magazine has appeared monthly since the {decade}.",
        "Critics have at times questioned its {critique}.",
        "{S} moved into larger premises in the {decade}.",
        "{S} runs a small museum about {poss} own past.",
        "{S} has a reputation for careful, slow growth.",
        "{S} was nearly sold in the {decade} but remained independent.",
        "Its logo has changed only twice.",
        "{S} has offices on {small_num} floors of a former warehouse.",
        "{S} supports a local rowing club.",
        "{S} runs an apprenticeship scheme for school leavers.",
        "{S} has a staff choir that performs each December.",
        "Its archive is open to researchers by appointment.",
        "Its annual staff party is a local tradition.",
        "Its staff are known for long careers.",
        "Several of its early buildings have been converted into flats.",
    ),
    "book": (
        "{S} received mixed reviews on release but later gained a devoted readership.",
        "{S} has been translated into {small_num} languages.",
        "{S} is set in a {setting}.",
        "{S} runs to about {pages} pages.",
        "{S} was adapted for radio in the {decade_late}.",
        "{S} is often taught in secondary schools.",
        "{S} follows {protagonist} over the course of a single year.",
        "{S} was briefly banned in several provinces.",
        "Its opening chapter is among the most quoted passages of its genre.",
        "Early drafts survive in a private archive.",
        "Readers have long debated the meaning of its final scene.",
        "A second edition added a short afterword.",
        "Its cover shows {cover}.",
        "{S} grew out of a short story abandoned years before.",
        "{S} was serialised in a weekly magazine before appearing in print.",
        "{S} is divided into {small_num} parts of unequal length.",
        "{S} was a modest commercial success.",
        "{S} inspired a stage adaptation in the {decade_late}.",
        "{S} has never gone out of print.",
        "{S} is told in the first person.",
        "{S} uses diary entries to tell much of its story.",
        "Its title comes from a line of an old folk song.",
        "Some early readers found its ending too bleak.",
        "A collector's edition with new illustrations appeared in the {decade_late}.",
        "Its manuscript was nearly lost in a house fire.",
    ),
    "film": (
        "{S} runs for about {minutes} minutes.",
        "{S} was shot on location in a {setting}.",
        "{S} received mixed reviews on release but later gained a devoted following.",
        "{S} follows {protagonist} over the course of a single summer.",
        "{S} won several awards at regional festivals.",
        "{S} was restored and shown again in cinemas in the {decade_late}.",
        "{S} was a modest success at the box office.",
        "Its score mixes strings with recorded street sounds.",
        "Its cast was made up largely of unknown actors.",
        "Critics praised its {adj_art} photography.",
        "A planned sequel was never made.",
        "The poster shows {cover}.",
        "{S} was shot in black and white.",
        "{S} took almost two years to complete.",
        "{S} opens with a long single shot of {cover}.",
        "{S} was dubbed into {small_num} languages.",
        "{S} inspired a short-lived television series.",
        "{S} is often screened at retrospectives.",
        "Its budget was small even by the standards of its time.",
        "Much of its dialogue was improvised.",
        "Its final scene was reshot after test screenings.",
        "A restored print is kept in a national collection.",
    ),
    "album": (
        "{S} contains {tracks} tracks.",
        "{S} was made over {small_num} weeks in a converted barn.",
        "{S} received mixed reviews on release but later gained a devoted following.",
        "{S} blends its main style with elements of folk music.",
        "{S} was reissued on vinyl in the {decade_late}.",
        "{S} sold steadily for years without reaching the charts.",
        "{S} was performed live in full only once.",
        "Its cover shows {cover}.",
        "Its closing track became a minor radio hit.",
        "Critics praised its {adj_art} arrangements.",
        "A deluxe edition added {small_num} unreleased songs.",
        "{S} was mixed in a single week.",
        "{S} features a string quartet on several songs.",
        "{S} opens with a short instrumental piece.",
        "{S} was promoted with a small tour of coastal towns.",
        "{S} has been covered in full by several younger bands.",
        "{S} runs for just under forty minutes.",
        "{S} was nearly shelved after a dispute over the running order.",
        "Its lyrics draw on old sea songs.",
        "Its liner notes were written by a close friend.",
        "Two of its songs were later used in television dramas.",
        "The original tapes were thought lost for years.",
    ),
}
_FILLER_ORDERS = 64  # distinct filler orders per pool; an entity uses one, from a random start
_FILLER_GROUP = {kind: ("organisation" if _KIND_TYPE[kind] == "organisation" else kind) for kind in _KIND_TYPE}

_OCCUPATIONS: dict[str, tuple[str, ...]] = {
    "book": ("novelist", "poet", "essayist", "playwright"),
    "film": ("filmmaker", "screenwriter"),
    "album": ("composer", "singer", "pianist", "guitarist", "songwriter"),
    "other": ("engineer", "physician", "economist", "architect", "chemist", "lawyer", "historian",
              "mathematician", "banker", "diplomat", "botanist", "journalist", "industrialist", "teacher"),
}
_OCCUPATION_SHARES = {"book": 0.2, "film": 0.1, "album": 0.15, "other": 0.55}

# Sentence subject after a passage's first sentence, by kind.
_BODY_SUBJECT = {
    "city": ("It", "The city"),
    "country": ("It", "The state"),
    "company": ("It", "The company"),
    "university": ("It", "The university"),
    "publisher": ("It", "The publishing house"),
    "studio": ("It", "The production company"),
    "label": ("It", "The record company"),
    "book": ("It", "The novel"),
    "film": ("It", "The film"),
    "album": ("It", "The album"),
}
_PRONOUNS = {  # pron, obj, poss
    "she": ("she", "her", "her"),
    "he": ("he", "him", "his"),
    "it": ("it", "it", "its"),
}

# ---------------------------------------------------------------------------------------------------------
# Configs
# ---------------------------------------------------------------------------------------------------------


def _check_int(owner: str, name: str, value: Any, low: int, high: int | None, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ConfigError(f"{owner}.{name} must be an int, got {type(value).__name__} {value!r}; {hint}")
    if value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"between {low} and {high}"
        raise ConfigError(f"{owner}.{name} must be {bounds}, got {value}; {hint}")


def _check_float(owner: str, name: str, value: Any, low: float, high: float, hint: str) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ConfigError(f"{owner}.{name} must be a number, got {type(value).__name__} {value!r}; {hint}")
    if not (low <= float(value) <= high):
        raise ConfigError(f"{owner}.{name} must be between {low} and {high}, got {value}; {hint}")


@dataclass(frozen=True)
class WorldConfig:
    """The size and seed of a synthetic world."""

    num_entities: int = 2000
    """Total number of entities, twins included. The corpus has `num_entities * passages_per_entity`
    passages; `WorldConfig.for_passages` sizes a world by passage count."""
    seed: int = 0
    """Seed of every random draw; equal configs give byte-identical worlds in any process."""
    distractor_rate: float = 0.15
    """Share of the non-twin entities that get a confusable twin (counted within `num_entities`): a
    same-kind entity with a near-identical name and independently drawn facts. 0 disables twins."""
    passages_per_entity: int = 3
    """Passages per entity: an overview and two fact-bearing sections; passages beyond the third hold
    filler only (more text to search through, no more facts)."""
    test_fraction: float = 0.2
    """Share of the entities reserved as start entities of the test split; the rest start train questions."""

    def __post_init__(self) -> None:
        owner = "WorldConfig"
        _check_int(owner, "num_entities", self.num_entities, MIN_ENTITIES, MAX_ENTITIES,
                   f"a world needs at least {MIN_ENTITIES} entities to hold every entity kind "
                   "(use WorldConfig.for_passages(n) to size it by passage count)")
        _check_int(owner, "seed", self.seed, 0, None, "use a non-negative int such as 0")
        _check_float(owner, "distractor_rate", self.distractor_rate, 0.0, 0.5,
                     "use 0 for no twins or e.g. 0.15 for the default share")
        _check_int(owner, "passages_per_entity", self.passages_per_entity, 3, 6,
                   "three sections hold the facts; extra passages (up to 6) add filler")
        _check_float(owner, "test_fraction", self.test_fraction, 0.05, 0.5,
                     "the test split takes this share of the start entities, e.g. 0.2")

    @classmethod
    def for_passages(cls, num_passages: int, **kwargs: Any) -> WorldConfig:
        """The smallest world with at least `num_passages` passages (other fields from `kwargs`).

        >>> WorldConfig.for_passages(100_000).num_entities
        33334
        """
        per = kwargs.get("passages_per_entity", cls.passages_per_entity)
        _check_int("WorldConfig.for_passages", "passages_per_entity", per, 3, 6, "use 3 to 6")
        _check_int("WorldConfig.for_passages", "num_passages", num_passages, MIN_ENTITIES * per,
                   MAX_ENTITIES * per, "the world needs at least that many passages")
        return cls(num_entities=math.ceil(num_passages / per), **kwargs)

    @property
    def num_passages(self) -> int:
        """Passages in the corpus of this world."""
        return self.num_entities * self.passages_per_entity


@dataclass(frozen=True)
class QuestionConfig:
    """Which questions to draw from a world."""

    hops: int | tuple[int, ...] = (1, 2, 3)
    """Hop count(s), each 1 to 4; question i has `hops[i % len(hops)]` hops, so every count is represented
    in equal shares. Normalised to a sorted tuple."""
    num_questions: int = 1000
    """How many distinct questions (distinct start entity and relation chain) to return."""
    split: Literal["train", "test"] = "train"
    """Which partition of start entities the questions start from; the partitions are disjoint."""
    seed: int = 0
    """Seed of the question draws (independent of the world seed)."""

    def __post_init__(self) -> None:
        owner = "QuestionConfig"
        hops = self.hops
        if isinstance(hops, (int, np.integer)) and not isinstance(hops, bool):
            hops = (int(hops),)
        if isinstance(hops, (str, bytes)) or not isinstance(hops, Iterable):
            raise ConfigError(f"{owner}.hops must be an int or a tuple of ints from 1 to 4, got {self.hops!r}")
        hops = tuple(hops)
        if not hops:
            raise ConfigError(f"{owner}.hops is empty; give at least one hop count from 1 to 4, e.g. (1, 2, 3)")
        for h in hops:
            if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or not 1 <= h <= 4:
                raise ConfigError(f"{owner}.hops must hold ints from 1 to 4, got {self.hops!r}")
        object.__setattr__(self, "hops", tuple(sorted({int(h) for h in hops})))
        _check_int(owner, "num_questions", self.num_questions, 1, None, "ask for at least one question")
        if self.split not in ("train", "test"):
            raise ConfigError(f"{owner}.split must be 'train' or 'test', got {self.split!r}")
        _check_int(owner, "seed", self.seed, 0, None, "use a non-negative int such as 0")


# ---------------------------------------------------------------------------------------------------------
# Entities
# ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entity:
    """One entity of the world (read-only)."""

    id: str
    """Unique id, e.g. `person-000042`; its passages are `f"{id}-{k}"`."""
    name: str
    """Unique display name; also the title of its passages."""
    type: str
    """`person`, `place`, `organisation` or `work`."""
    kind: str
    """Finer kind: person, city, country, company, university, publisher, studio, label, book, film, album."""
    aliases: tuple[str, ...] = ()
    """Other accepted names (acronyms of companies, formal names of countries)."""
    twin_of: str | None = None
    """Id of the entity this one is a confusable twin of, if any."""
    attributes: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Descriptive attributes used in passages (birth year, occupation, genre, year...)."""


class EntityTable(Sequence[Entity]):
    """The world's entities in id order, with lookup by id and by name. Immutable."""

    def __init__(self, entities: Sequence[Entity]):
        self._entities = tuple(entities)
        self._by_id = {e.id: i for i, e in enumerate(self._entities)}
        self._by_name = {e.name: i for i, e in enumerate(self._entities)}

    def __len__(self) -> int:
        return len(self._entities)

    def __getitem__(self, i):  # type: ignore[override]
        return self._entities[i]

    def __iter__(self) -> Iterator[Entity]:
        return iter(self._entities)

    def __contains__(self, entity_id: object) -> bool:
        return entity_id in self._by_id

    def get(self, entity_id: str) -> Entity:
        """The entity with id `entity_id`; KeyError if absent."""
        return self._entities[self._by_id[entity_id]]

    def by_name(self, name: str) -> Entity:
        """The entity named `name`; KeyError if absent."""
        return self._entities[self._by_name[name]]

    def index(self, entity_id: str) -> int:  # type: ignore[override]
        """Position of `entity_id`."""
        return self._by_id[entity_id]

    def __repr__(self) -> str:
        return f"EntityTable({len(self)} entities)"


# ---------------------------------------------------------------------------------------------------------
# Random helpers
# ---------------------------------------------------------------------------------------------------------


def _rng(*key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(k) for k in key]))


class _Draws:
    """Sequential uniform draws from one precomputed row, so that per-entity text choices cost no Generator
    call each. Wraps around if a very long passage consumes the row (still deterministic)."""

    __slots__ = ("_i", "_n", "_row")

    def __init__(self, row: list[float]):
        self._row = row
        self._i = 0
        self._n = len(row)

    def uniform(self) -> float:
        v = self._row[self._i % self._n]
        self._i += 1
        return v

    def index(self, n: int) -> int:
        return int(self.uniform() * n)  # uniform() < 1, so this is < n

    def pick(self, seq: Sequence[Any]) -> Any:
        return seq[self.index(len(seq))]

    def integer(self, low: int, high: int, step: int = 1) -> int:
        """Uniform in [low, high] on the grid low + k * step."""
        return low + step * self.index((high - low) // step + 1)


class _Slots(dict):
    """`str.format_map` mapping: fixed keys first, then a fresh draw from `_SLOTS` for any other name."""

    def __init__(self, fixed: Mapping[str, Any], draws: _Draws):
        super().__init__(fixed)
        self._draws = draws

    def __missing__(self, key: str) -> str:
        if key in _SLOTS:
            return self._draws.pick(_SLOTS[key])
        if key in _NUMERIC_SLOTS:
            low, high, step = _NUMERIC_SLOTS[key]
            value = self._draws.integer(low, high, step)
            return f"{value:,}" if value >= 10_000 else str(value)
        raise KeyError(key)


# ---------------------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------------------


class _WordSource:
    """Unique, pronounceable fictional words, drawn in batches from a seeded Generator."""

    def __init__(self, rng: np.random.Generator):
        self._rng = rng
        self._seen: set[str] = set()
        self._forbidden = _TITLE_WORDS | _STOPWORDS | _KEYWORDS | {p.lower() for p in _CITY_PREFIXES}

    def take(self, n: int, min_len: int = 4, max_len: int = 8) -> list[str]:
        out: list[str] = []
        while len(out) < n:
            m = int((n - len(out)) * 1.6) + 64
            nsyl = np.where(self._rng.random(m) < 0.72, 2, 3)
            ons = self._rng.integers(0, len(_ONSETS), (m, 3)).tolist()
            nuc = self._rng.integers(0, len(_NUCLEI), (m, 3)).tolist()
            mid = self._rng.integers(0, len(_MEDIAL_CODAS), (m, 3)).tolist()
            fin = self._rng.integers(0, len(_FINAL_CODAS), m).tolist()
            for i in range(m):
                k = int(nsyl[i])
                parts = []
                for s in range(k):
                    coda = _FINAL_CODAS[fin[i]] if s == k - 1 else _MEDIAL_CODAS[mid[i][s]]
                    parts.append(_ONSETS[ons[i][s]] + _NUCLEI[nuc[i][s]] + coda)
                word = "".join(parts)
                if not (min_len <= len(word) <= max_len) or _BAD_CLUSTER.search(word):
                    continue
                if word in self._seen or word in self._forbidden:
                    continue
                self._seen.add(word)
                out.append(word.capitalize())
                if len(out) == n:
                    break
        return out


def _with_article(noun: str) -> str:
    return ("an " if noun[0] in _VOWELS else "a ") + noun


def _mutate_vowel(word: str, draws: _Draws) -> str:
    """`word` with one vowel replaced by another: a near-identical but distinct name token."""
    positions = [i for i, ch in enumerate(word.lower()) if ch in _VOWELS]
    if not positions:
        return word
    i = draws.pick(positions)
    old = word[i].lower()
    new = draws.pick([v for v in _VOWELS if v != old])
    if word[i].isupper():
        new = new.upper()
    return word[:i] + new + word[i + 1:]


# ---------------------------------------------------------------------------------------------------------
# The world
# ---------------------------------------------------------------------------------------------------------


class SyntheticWorld:
    """A generated world: entities, relations, the corpus of passages, and a question generator.

    Build with `SyntheticWorld.generate(WorldConfig(...))`.
    """

    def __init__(
        self,
        config: WorldConfig,
        entities: EntityTable,
        relations: dict[str, dict[int, tuple[int, ...]]],
        corpus: Corpus,
        fact_section: dict[tuple[int, str], int],
        test_starts: np.ndarray,
    ):
        self.config = config
        self._entities = entities
        self._relations = relations
        self._corpus = corpus
        self._fact_section = fact_section
        self._is_test = np.zeros(len(entities), dtype=bool)
        self._is_test[test_starts] = True

    # -- construction ------------------------------------------------------------------------------------

    @classmethod
    def generate(cls, config: WorldConfig | None = None) -> SyntheticWorld:
        """Generate the world described by `config` (default `WorldConfig()`)."""
        if config is None:
            config = WorldConfig()
        if not isinstance(config, WorldConfig):
            raise ConfigError(f"SyntheticWorld.generate expects a WorldConfig, got {type(config).__name__}")
        t0 = time.perf_counter()
        world = _Builder(config).build()
        logger.debug("synthetic world: %d entities, %d passages in %.2fs", len(world.entities),
                     len(world.corpus), time.perf_counter() - t0)
        return world

    # -- read access -------------------------------------------------------------------------------------

    @property
    def corpus(self) -> Corpus:
        """Every passage of every entity, in entity order."""
        return self._corpus

    @property
    def entities(self) -> EntityTable:
        """The entities, read-only, in id order."""
        return self._entities

    def objects(self, entity_id: str, relation: str) -> tuple[str, ...]:
        """Ids of the objects of `relation` for subject `entity_id` (empty if none), from the relation tables."""
        if relation not in self._relations:
            raise ConfigError(f"unknown relation {relation!r}; relations are {', '.join(RELATIONS)}")
        objs = self._relations[relation].get(self._entities.index(entity_id), ())
        return tuple(self._entities[o].id for o in objs)

    def fact_doc(self, entity_id: str, relation: str) -> str | None:
        """Id of the passage of `entity_id` that states `relation`, or None if it has no such relation."""
        section = self._fact_section.get((self._entities.index(entity_id), relation))
        return None if section is None else f"{entity_id}-{section}"

    def split_of(self, entity_id: str) -> Literal["train", "test"]:
        """The split whose questions may start from `entity_id`."""
        return "test" if self._is_test[self._entities.index(entity_id)] else "train"

    # -- questions ---------------------------------------------------------------------------------------

    def questions(self, config: QuestionConfig | None = None) -> list[QARecord]:
        """`config.num_questions` distinct questions of the requested hop counts and split.

        Raises ConfigError if the world cannot supply that many distinct chains (use a larger world or
        fewer questions).
        """
        if config is None:
            config = QuestionConfig()
        if not isinstance(config, QuestionConfig):
            raise ConfigError(f"SyntheticWorld.questions expects a QuestionConfig, got {type(config).__name__}")
        split_code = 1 if config.split == "test" else 0
        rng = _rng(self.config.seed, _STREAM_QUESTIONS, config.seed, split_code)
        starts = np.flatnonzero(self._is_test if split_code else ~self._is_test)
        starts = np.array([s for s in starts.tolist() if self._steps(int(s), (int(s),))], dtype=np.int64)
        if len(starts) == 0:
            raise ConfigError(f"the {config.split} split of this world has no usable start entity; "
                              "use a larger WorldConfig.num_entities")
        records: list[QARecord] = []
        seen: set[tuple[int, ...]] = set()
        # Random walks rarely fail or repeat in a world of useful size; a long run of failures means the
        # split has run out of distinct chains of the requested length.
        failures = 0
        while len(records) < config.num_questions:
            hops = config.hops[len(records) % len(config.hops)]
            if failures > _MAX_FAILED_WALKS:
                raise ConfigError(
                    f"could build only {len(records)} of {config.num_questions} distinct {config.split} questions "
                    f"with hops {config.hops} from a world of {len(self._entities)} entities; use a larger "
                    "WorldConfig.num_entities, fewer questions or other hop counts"
                )
            failures += 1
            chain = self._walk(rng, int(starts[rng.integers(len(starts))]), hops)
            if chain is None:
                continue
            path, rels = chain
            key = tuple(path) + tuple(RELATIONS.index(r) for r in rels)
            if key in seen:
                continue
            record = self._record(rng, path, rels, config, len(records))
            if record is None:
                continue
            seen.add(key)
            records.append(record)
            failures = 0
        return records

    def _steps(self, entity: int, visited: tuple[int, ...]) -> list[tuple[str, int]]:
        """(relation, object) pairs usable as the next hop: a single object not yet on the chain."""
        out = []
        for rel in _RELATIONS_OF[self._entities[entity].kind]:
            objs = self._relations[rel].get(entity, ())
            if len(objs) == 1 and objs[0] not in visited:
                out.append((rel, objs[0]))
        return out

    def _walk(self, rng: np.random.Generator, start: int, hops: int) -> tuple[list[int], list[str]] | None:
        path, rels = [start], []
        for _ in range(hops):
            steps = self._steps(path[-1], tuple(path))
            if not steps:
                return None
            rel, obj = steps[int(rng.integers(len(steps)))]
            path.append(obj)
            rels.append(rel)
        return path, rels

    def _record(self, rng: np.random.Generator, path: list[int], rels: list[str], config: QuestionConfig,
                number: int) -> QARecord | None:
        ents = [self._entities[i] for i in path]
        start = ents[0]
        desc = _START_REF.get(start.kind, "{N}").format(N=start.name)
        # Inner forms ("the city where {S} was born") only around a name or around one tail phrase.
        inner_ok = True
        for i, rel in enumerate(rels[:-1]):
            forms = _lookup(_DESCRIBE, rel, ents[i].kind)
            options = forms["tail"] + (forms["inner"] if inner_ok else ())
            choice = options[int(rng.integers(len(options)))]
            used_inner = choice in forms["inner"]
            inner_ok = i == 0 and not used_inner
            desc = choice.format(S=desc, objnoun=_KIND_NOUN[ents[i + 1].kind])
        forms = _lookup(_ASK, rels[-1], ents[-2].kind)
        asks = forms["tail"] + (forms["inner"] if inner_ok else ())
        question = asks[int(rng.integers(len(asks)))].format(S=desc, objnoun=_KIND_NOUN[ents[-1].kind])
        answer = ents[-1]
        # A twin's name can contain the answer's name ("New Halvex" vs "Halvex"): never give it away.
        if answer.name.lower() in question.lower():
            return None
        gold_docs = tuple(f"{ents[i].id}-{self._fact_section[(path[i], rel)]}" for i, rel in enumerate(rels))
        return QARecord(
            id=f"synthetic-{config.split}-{number:06d}",
            question=question,
            answers=(answer.name, *answer.aliases),
            gold_entities=tuple(e.name for e in ents[1:]),
            gold_docs=gold_docs,
            gold_titles=tuple(e.name for e in ents[:-1]),
            hops=len(rels),
            source="synthetic",
            metadata={
                "chain": list(rels),
                "split": config.split,
                "path_ids": [e.id for e in ents],
                "path_names": [e.name for e in ents],
                "path_kinds": [e.kind for e in ents],
                "world_seed": self.config.seed,
                "question_seed": config.seed,
            },
        )

    def oracle_trajectory(self, record: QARecord) -> list[str]:
        """The agent turns that solve `record`; see the module function `oracle_trajectory`."""
        return oracle_trajectory(record)

    def __repr__(self) -> str:
        return f"SyntheticWorld(entities={len(self._entities)}, passages={len(self._corpus)}, seed={self.config.seed})"


# ---------------------------------------------------------------------------------------------------------
# Oracle
# ---------------------------------------------------------------------------------------------------------


def oracle_query(name: str, relation: str, subject_kind: str) -> str:
    """The search query for `relation` of the entity `name`: its name and the relation's keyword."""
    return f"{name} {relation_keyword(relation, subject_kind)}"


def _phrase(relation: str, subject_kind: str, object_kind: str, subject_name: str) -> str:
    ref = _START_REF.get(subject_kind, "{N}").format(N=subject_name)
    return _lookup(_DESCRIBE, relation, subject_kind)["tail"][0].format(S=ref, objnoun=_KIND_NOUN[object_kind])


def oracle_trajectory(record: QARecord) -> list[str]:
    """The turns of an agent that solves a synthetic `record` in Search-R1 tag format.

    One turn per hop, `<think>...</think>\\n<search>NAME KEYWORD</search>`, where NAME is the entity found
    so far and KEYWORD names the relation as the fact's passage words it, then a final
    `<think>...</think>\\n<answer>ANSWER</answer>`. Needs the `metadata` a `SyntheticWorld` writes.
    """
    meta = record.metadata
    try:
        rels, names, kinds = list(meta["chain"]), list(meta["path_names"]), list(meta["path_kinds"])
    except KeyError as exc:
        raise ConfigError(f"record {record.id!r} lacks synthetic metadata {exc}; only records made by "
                          "SyntheticWorld.questions have an oracle trajectory") from None
    turns = []
    for i, rel in enumerate(rels):
        need = _phrase(rel, kinds[i], kinds[i + 1], names[i])
        if i == 0:
            plan = f"The question takes {len(rels)} step{'s' if len(rels) > 1 else ''}. " if len(rels) > 1 else ""
            think = f"{plan}First I need {need}."
        else:
            found = _phrase(rels[i - 1], kinds[i - 1], kinds[i], names[i - 1])
            think = f"The search result says {found} is {names[i]}. Next I need {need}."
        turns.append(f"<think>{think}</think>\n<search>{oracle_query(names[i], rel, kinds[i])}</search>")
    last = _phrase(rels[-1], kinds[-2], kinds[-1], names[-2])
    turns.append(f"<think>The search result says {last} is {names[-1]}, so the answer is {names[-1]}.</think>\n"
                 f"<answer>{record.answers[0]}</answer>")
    return turns


# ---------------------------------------------------------------------------------------------------------
# Builder
# ---------------------------------------------------------------------------------------------------------


class _Builder:
    """Draws a world in stages: names, relations, attributes, passages. Private; use SyntheticWorld.generate."""

    def __init__(self, config: WorldConfig):
        self.config = config
        self.n = config.num_entities
        # Approximate word counts (a slot counts as one word) and a few fixed random orders per filler pool.
        self._filler_words = {g: [len(t.split()) for t in pool] for g, pool in _FILLERS.items()}
        order_rng = _rng(config.seed, _STREAM_TEXT, 1)
        self._filler_orders = {g: [order_rng.permutation(len(pool)).tolist() for _ in range(_FILLER_ORDERS)]
                               for g, pool in _FILLERS.items()}

    # -- counts and names -----------------------------------------------------------------------------------

    def _counts(self) -> tuple[dict[str, int], int]:
        n_base = round(self.n / (1.0 + self.config.distractor_rate))
        counts = {k: max(_KIND_MINIMUM.get(k, 2), round(share * n_base)) for k, share in _KIND_SHARES.items()}
        counts = {"person": n_base - sum(counts.values()), **counts}
        return counts, self.n - n_base

    def build(self) -> SyntheticWorld:
        cfg = self.config
        counts, n_twins = self._counts()
        name_rng = _rng(cfg.seed, _STREAM_NAMES)
        words = _WordSource(name_rng)
        keys: set[str] = set()

        kinds: list[str] = []
        names: list[str] = []
        for kind, count in counts.items():
            for name in self._names(kind, count, words, name_rng, keys):
                kinds.append(kind)
                names.append(name)
        n_base = len(names)

        # Twins: confusable names of randomly chosen base entities.
        twin_of: list[int] = [-1] * n_base
        originals = name_rng.choice(n_base, size=n_twins, replace=False).tolist() if n_twins else []
        draws = _Draws(name_rng.random(max(64, 24 * n_twins)).tolist())
        for orig in originals:
            twin = self._twin_name(kinds[orig], names[orig], draws, keys)
            if twin is None:  # no confusable variant free: a plain new entity of the kind keeps the count exact
                twin = self._names(kinds[orig], 1, words, name_rng, keys)[0]
                twin_of.append(-1)
            else:
                twin_of.append(orig)
            kinds.append(kinds[orig])
            names.append(twin)

        # Shuffle so ids reveal neither kind blocks nor twins.
        order = name_rng.permutation(len(names)).tolist()
        position = [0] * len(order)
        for new, old in enumerate(order):
            position[old] = new
        kinds = [kinds[o] for o in order]
        names = [names[o] for o in order]
        twin_of = [position[twin_of[o]] if twin_of[o] >= 0 else -1 for o in order]

        by_kind: dict[str, np.ndarray] = {k: np.array([i for i, kk in enumerate(kinds) if kk == k], dtype=np.int64)
                                          for k in _KIND_TYPE}
        rel_rng = _rng(cfg.seed, _STREAM_RELATIONS)
        attrs: list[dict[str, Any]] = [{} for _ in kinds]
        relations = self._relations(rel_rng, kinds, by_kind, twin_of, attrs)
        aliases = self._aliases(names, kinds, attrs, keys)

        ids = [f"{kind}-{i:06d}" for i, kind in enumerate(kinds)]
        entities = EntityTable([
            Entity(
                id=ids[i],
                name=names[i],
                type=_KIND_TYPE[kinds[i]],
                kind=kinds[i],
                aliases=aliases[i],
                twin_of=ids[twin_of[i]] if twin_of[i] >= 0 else None,
                attributes=MappingProxyType(attrs[i]),
            )
            for i in range(len(kinds))
        ])
        docs, fact_section = self._passages(entities, relations, attrs)
        corpus = Corpus(docs, name=f"synthetic-{cfg.num_entities}-{cfg.seed}")

        split_order = _rng(cfg.seed, _STREAM_SPLIT).permutation(len(kinds))
        test_starts = np.sort(split_order[: round(cfg.test_fraction * len(kinds))])
        return SyntheticWorld(cfg, entities, relations, corpus, fact_section, test_starts)

    def _claim(self, name: str, keys: set[str]) -> bool:
        key = _name_key(name)
        if not key or key in keys or _KEYWORDS.intersection(key.split()):
            return False
        keys.add(key)
        return True

    def _names(self, kind: str, count: int, words: _WordSource, rng: np.random.Generator, keys: set[str]) -> list[str]:
        """`count` new unique names for `kind`."""
        out: list[str] = []
        if kind == "person":
            # Limited given-name and surname pools, so surnames are shared as in real families.
            given = words.take(max(30, count // 4 + 10))
            family = words.take(max(30, count // 3 + 10))
            while len(out) < count:
                m = (count - len(out)) * 2 + 16
                gi = rng.integers(0, len(given), m).tolist()
                fi = rng.integers(0, len(family), m).tolist()
                for g, f in zip(gi, fi, strict=True):
                    name = f"{given[g]} {family[f]}"
                    if self._claim(name, keys):
                        out.append(name)
                        if len(out) == count:
                            break
            return out
        while len(out) < count:
            m = count - len(out) + 8
            u = rng.random((m, 4)).tolist()
            core = words.take(m)
            extra = words.take(m)
            for i in range(m):
                name = self._compose(kind, core[i], extra[i], u[i])
                if self._claim(name, keys):
                    out.append(name)
                    if len(out) == count:
                        break
        return out

    @staticmethod
    def _compose(kind: str, core: str, extra: str, u: list[float]) -> str:
        def pick(seq: Sequence[str], x: float) -> str:
            return seq[min(int(x * len(seq)), len(seq) - 1)]

        if kind == "city":
            return f"{pick(_CITY_PREFIXES, u[1])} {core}" if u[0] < 0.3 else core
        if kind == "country":
            suffix = pick(_COUNTRY_SUFFIXES, u[1])
            stem = core[:-1] if core[-1] in _VOWELS and suffix[0] in _VOWELS else core
            return stem + suffix
        if kind == "company":
            suffix = pick(_ORG_SUFFIXES["company"], u[1])
            if u[0] < 0.5:
                return f"{core} {extra}{pick(_ADJECTIVAL_ENDINGS, u[2])} {suffix}"
            return f"{core} {suffix}"
        if kind == "university":
            return pick(_UNIVERSITY_PATTERNS, u[1]).format(A=core)
        if kind in _ORG_SUFFIXES:
            return f"{core} {pick(_ORG_SUFFIXES[kind], u[1])}"
        # Works: English title patterns, some with a fictional place word.
        adj, noun, noun2 = pick(_TITLE_ADJECTIVES, u[1]), pick(_TITLE_NOUNS, u[2]), pick(_TITLE_NOUNS, u[3])
        pattern = u[0]
        if pattern < 0.3:
            return f"The {adj} {noun}"
        if pattern < 0.55 and noun != noun2:
            return f"{noun} of {noun2}"
        if pattern < 0.8:
            return f"The {noun} of {core}"
        if kind == "album" and pattern < 0.9:
            return core
        return f"{adj} {core}"

    def _twin_name(self, kind: str, name: str, draws: _Draws, keys: set[str]) -> str | None:
        """A free name confusable with `name`, or None."""
        parts = name.split(" ")
        for _ in range(12):
            cand = list(parts)
            r = draws.uniform()
            if kind == "person" and r < 0.5:
                # Shared surname, different given name (a sibling).
                cand[0] = _mutate_vowel(_mutate_vowel(cand[0], draws), draws)
            elif kind in _ORG_SUFFIXES and kind != "university" and r < 0.5 and len(parts) >= 2:
                # Same name, other suffix ("Orvane Works" / "Orvane Industries").
                suffix = draws.pick(_ORG_SUFFIXES[kind])
                stem = [p for p in parts if not any(p in s.split() for s in _ORG_SUFFIXES[kind])]
                cand = stem + suffix.split()
            elif _KIND_TYPE[kind] == "work" and r < 0.6:
                # One title word swapped for another of the same class.
                slots = [i for i, p in enumerate(parts) if p in _TITLE_ADJECTIVES or p in _TITLE_NOUNS]
                if not slots:
                    continue
                i = draws.pick(slots)
                cand[i] = draws.pick(_TITLE_ADJECTIVES if parts[i] in _TITLE_ADJECTIVES else _TITLE_NOUNS)
            else:
                # One vowel changed in a fictional word.
                slots = [i for i, p in enumerate(parts) if p not in _FIXED_NAME_WORDS]
                if not slots:
                    continue
                i = draws.pick(slots)
                cand[i] = _mutate_vowel(cand[i], draws)
            twin = " ".join(cand)
            if twin != name and self._claim(twin, keys):
                return twin
        return None

    # -- relations and attributes ---------------------------------------------------------------------------

    def _relations(self, rng: np.random.Generator, kinds: list[str], by_kind: dict[str, np.ndarray],
                   twin_of: list[int], attrs: list[dict[str, Any]]) -> dict[str, dict[int, tuple[int, ...]]]:
        rel: dict[str, dict[int, tuple[int, ...]]] = {r: {} for r in RELATIONS}
        persons, cities, countries = by_kind["person"], by_kind["city"], by_kind["country"]
        universities = by_kind["university"]
        orgs = np.sort(np.concatenate([by_kind[k] for k in _ORG_KINDS]))

        def uniform_choice(pool: np.ndarray, size: int) -> list[int]:
            return pool[rng.integers(0, len(pool), size)].tolist()

        # Persons: birth year, pronoun, occupation group (creators of each work kind come from its group).
        n_p = len(persons)
        years = rng.integers(1820, 1961, n_p).tolist()  # founding and release years stay before 2021
        genders = (rng.random(n_p) < 0.5).tolist()
        groups = list(_OCCUPATION_SHARES)
        group_idx = rng.choice(len(groups), size=n_p, p=list(_OCCUPATION_SHARES.values()))
        group_idx[: len(groups)] = np.arange(len(groups))  # every group has at least one member
        occ_u = rng.random(n_p).tolist()
        members: dict[str, list[int]] = {g: [] for g in groups}
        for j, p in enumerate(persons.tolist()):
            group = groups[int(group_idx[j])]
            occupations = _OCCUPATIONS[group]
            attrs[p].update(birth_year=years[j], pronoun="she" if genders[j] else "he", occupation_group=group,
                            occupation=occupations[min(int(occ_u[j] * len(occupations)), len(occupations) - 1)])
            members[group].append(p)

        born = uniform_choice(cities, n_p)
        has_job, two_jobs = rng.random(n_p) < 0.62, rng.random(n_p) < 0.15
        jobs = rng.integers(0, len(orgs), (n_p, 2))
        has_school = rng.random(n_p) < 0.55
        school = uniform_choice(universities, n_p)
        for j, p in enumerate(persons.tolist()):
            rel["born_in"][p] = (born[j],)
            if has_job[j]:
                first, second = int(orgs[jobs[j, 0]]), int(orgs[jobs[j, 1]])
                # Two employers make "the employer of X" ambiguous; the question walker skips such people.
                rel["employer"][p] = (first, second) if two_jobs[j] and first != second else (first,)
            if has_school[j]:
                rel["educated_at"][p] = (school[j],)

        # Marriages: random disjoint pairs.
        married = persons[rng.random(n_p) < 0.45]
        married = rng.permutation(married).tolist()
        for a, b in zip(married[0::2], married[1::2], strict=False):  # an odd one out stays single
            rel["spouse"][a], rel["spouse"][b] = (b,), (a,)
            year = max(attrs[a]["birth_year"], attrs[b]["birth_year"]) + int(rng.integers(20, 36))
            attrs[a]["married_year"] = attrs[b]["married_year"] = year

        # Cities: each country gets at least one city.
        city_list = rng.permutation(cities).tolist()
        country_of = countries.tolist() + uniform_choice(countries, max(0, len(city_list) - len(countries)))
        for c, k in zip(city_list, country_of, strict=False):  # cities always outnumber countries
            rel["located_in"][c] = (k,)

        # Mayors: most cities have one, each a different person.
        has_mayor = (rng.random(len(cities)) < 0.7).tolist()
        mayors = rng.permutation(persons).tolist()
        for j, c in enumerate(cities.tolist()):
            if has_mayor[j] and j < len(mayors):
                rel["mayor"][c] = (mayors[j],)

        # Organisations: founder, founding year after the founder's 20th birthday, headquarters.
        founders = uniform_choice(persons, len(orgs))
        hq = uniform_choice(cities, len(orgs))
        gaps = rng.integers(22, 60, len(orgs)).tolist()
        for j, o in enumerate(orgs.tolist()):
            rel["founded_by"][o] = (founders[j],)
            rel["headquartered_in"][o] = (hq[j],)
            attrs[o]["founding_year"] = attrs[founders[j]]["birth_year"] + gaps[j]

        # Works: creator from the matching occupation group, publisher of the matching kind.
        for kind in _WORK_KINDS:
            works = by_kind[kind]
            creators = np.array(members[kind], dtype=np.int64)
            made_by = uniform_choice(creators, len(works))
            issued = uniform_choice(by_kind[_PUBLISHER_KIND[kind]], len(works))
            gaps = rng.integers(20, 56, len(works)).tolist()
            for j, w in enumerate(works.tolist()):
                rel["created_by"][w] = (made_by[j],)
                rel["published_by"][w] = (issued[j],)
                attrs[w]["year"] = attrs[made_by[j]]["birth_year"] + gaps[j]

        # Twins get their own facts: where a single-valued fact equals the original's, move it.
        candidates = {"born_in": lambda e: cities, "educated_at": lambda e: universities,
                      "headquartered_in": lambda e: cities, "founded_by": lambda e: persons,
                      "located_in": lambda e: countries,
                      "created_by": lambda e: np.array(members[kinds[e]], dtype=np.int64),
                      "published_by": lambda e: by_kind[_PUBLISHER_KIND[kinds[e]]]}
        shift = rng.integers(1, 1 << 30, len(kinds)).tolist()
        for t, o in enumerate(twin_of):
            if o < 0:
                continue
            for r, pool_of in candidates.items():
                if t in rel[r] and rel[r][t] == rel[r].get(o):
                    pool = pool_of(t).tolist()
                    if len(pool) > 1:
                        here = pool.index(rel[r][t][0])
                        rel[r][t] = (pool[(here + 1 + shift[t] % (len(pool) - 1)) % len(pool)],)
            if "year" in attrs[t] and kinds[t] in _WORK_KINDS:
                creator = rel["created_by"][t][0]
                attrs[t]["year"] = max(attrs[t]["year"], attrs[creator]["birth_year"] + 20)
            if "founding_year" in attrs[t]:
                founder = rel["founded_by"][t][0]
                attrs[t]["founding_year"] = max(attrs[t]["founding_year"], attrs[founder]["birth_year"] + 20)

        # Derived relations: founded (inverse of founded_by), capital (one city of each country).
        for o in orgs.tolist():
            f = rel["founded_by"][o][0]
            rel["founded"][f] = (*rel["founded"].get(f, ()), o)
        cities_of: dict[int, list[int]] = {}
        for c in cities.tolist():
            cities_of.setdefault(rel["located_in"][c][0], []).append(c)
        capital_u = rng.random(len(countries)).tolist()
        for j, k in enumerate(countries.tolist()):
            own = cities_of.get(k)
            if own:
                cap = own[min(int(capital_u[j] * len(own)), len(own) - 1)]
                rel["capital"][k] = (cap,)
                attrs[cap]["is_capital"] = True
        return rel

    def _aliases(self, names: list[str], kinds: list[str], attrs: list[dict[str, Any]],
                 keys: set[str]) -> list[tuple[str, ...]]:
        rng_u = _rng(self.config.seed, _STREAM_NAMES, 1).random(len(names)).tolist()
        proposals: list[str | None] = [None] * len(names)
        for i, (name, kind) in enumerate(zip(names, kinds, strict=True)):
            if kind == "company" and len(name.split()) >= 3:
                proposals[i] = "".join(w[0] for w in name.split()).upper()
            elif kind == "country":
                form = _COUNTRY_FORMS[min(int(rng_u[i] * len(_COUNTRY_FORMS)), len(_COUNTRY_FORMS) - 1)]
                proposals[i] = f"{form} of {name}"
                attrs[i]["formal"] = f"{form} of {name}"
        # An alias shared by two entities, or equal to a name, identifies nothing: drop it everywhere.
        counts: dict[str, int] = {}
        for a in proposals:
            if a is not None:
                counts[a] = counts.get(a, 0) + 1
        out: list[tuple[str, ...]] = []
        for i, a in enumerate(proposals):
            if a is None or counts[a] > 1 or (kinds[i] == "company" and _name_key(a) in keys):
                out.append(())
            else:
                out.append((a,))
        return out

    # -- passages -------------------------------------------------------------------------------------------

    def _passages(self, entities: EntityTable, relations: dict[str, dict[int, tuple[int, ...]]],
                  attrs: list[dict[str, Any]]) -> tuple[list[Document], dict[tuple[int, str], int]]:
        per = self.config.passages_per_entity
        rng = _rng(self.config.seed, _STREAM_TEXT)
        # Objects a person is credited with, for the overview's list of works.
        credits: dict[int, list[int]] = {}
        for w, (c,) in relations["created_by"].items():
            credits.setdefault(c, []).append(w)
        docs: list[Document] = []
        fact_section: dict[tuple[int, str], int] = {}
        chunk = 4096
        for start in range(0, len(entities), chunk):
            rows = rng.random((min(chunk, len(entities) - start), 160)).tolist()
            for offset, row in enumerate(rows):
                i = start + offset
                texts = self._entity_texts(i, entities, relations, attrs, credits, _Draws(row), per, fact_section)
                ent = entities[i]
                docs.extend(Document(f"{ent.id}-{k}", ent.name, text) for k, text in enumerate(texts))
        return docs, fact_section

    def _entity_texts(self, i: int, entities: EntityTable, relations: dict[str, dict[int, tuple[int, ...]]],
                      attrs: list[dict[str, Any]], credits: dict[int, list[int]], draws: _Draws, per: int,
                      fact_section: dict[tuple[int, str], int]) -> list[str]:
        ent = entities[i]
        kind = ent.kind
        attr = attrs[i]
        pronoun = attr.get("pronoun", "it")
        pron, obj, poss = _PRONOUNS[pronoun]
        fixed = {"pron": pron, "obj": obj, "poss": poss, **{k: v for k, v in attr.items() if isinstance(v, str)}}
        fixed["year"] = attr.get("year", attr.get("founding_year", ""))
        if "occupation" in attr:
            fixed["a_occupation"] = _with_article(attr["occupation"])
        alias = ent.aliases[0] if ent.aliases else None
        if kind == "country":
            fixed["formal"] = attr.get("formal", f"Republic of {ent.name}")

        def body_subject() -> tuple[str, str]:
            if pronoun in ("he", "she"):
                return pron.capitalize(), poss.capitalize()
            return draws.pick(_BODY_SUBJECT[kind]), "Its"

        def lead_subject() -> tuple[str, str]:
            return ent.name, ent.name + ("'" if ent.name.endswith("s") else "'s")

        def render(template: str, lead: bool, extra: Mapping[str, Any] | None = None) -> str:
            s, p = lead_subject() if lead else body_subject()
            values = {**fixed, "S": s, "Poss": p, **(extra or {})}
            return template.format_map(_Slots(values, draws))

        # Per entity one target length, so its passages have nearly equal lengths and BM25's length
        # normalisation does not favour one of them over the fact's passage.
        target = 50 + draws.index(46)
        group = _FILLER_GROUP[kind]
        fillers, lengths = _FILLERS[group], self._filler_words[group]
        # One random order of the fillers per entity, walked across its passages, so that its passages do
        # not repeat each other until the pool is used up.
        order = self._filler_orders[group][draws.index(_FILLER_ORDERS)]
        cursor = draws.index(len(order))
        sections: list[list[str]] = [[] for _ in range(per)]

        facts_by_section: dict[int, list[str]] = {}
        for rel in _RELATIONS_OF[kind]:
            if relations[rel].get(i):
                facts_by_section.setdefault(_FACT_SECTION[rel], []).append(rel)

        for k in range(per):
            sentences = sections[k]
            if k == 0 and kind in _INTROS:
                sentences.append(render(draws.pick(_INTROS[kind]), True))
                if alias is not None and kind == "company":
                    sentences.append(f"It is often known by the abbreviation {alias}.")
                if kind == "person" and i in credits:
                    titles = [entities[w].name for w in credits[i][:3]]
                    listed = titles[0] if len(titles) == 1 else ", ".join(titles[:-1]) + " and " + titles[-1]
                    sentences.append(f"{poss.capitalize()} best-known pieces include {listed}.")
                if kind == "city" and attr.get("is_capital"):
                    sentences.append("It is the seat of the national government.")
            for rel in facts_by_section.get(k, ()):
                sentences.append(self._fact_sentence(rel, kind, relations[rel][i], entities, attrs, attr, draws,
                                                     lead=not sentences, render=render))
                fact_section[(i, rel)] = k
            count = sum(len(s.split()) for s in sentences)
            for _ in range(len(order)):
                if sentences and count >= target - 4:
                    break
                j = order[cursor % len(order)]
                cursor += 1
                # A passage without intro or fact opens with a filler that names the entity.
                if not sentences and not fillers[j].startswith(("{S}", "{Poss}")):
                    continue
                if count + lengths[j] > target + 6:
                    continue
                text = render(fillers[j], not sentences)
                sentences.append(text)
                count += len(text.split())
        return [" ".join(s) for s in sections]

    @staticmethod
    def _fact_sentence(rel: str, kind: str, objs: tuple[int, ...], entities: EntityTable,
                       attrs: list[dict[str, Any]], attr: Mapping[str, Any], draws: _Draws, lead: bool,
                       render: Callable[..., str]) -> str:
        names = [entities[o].name for o in objs]
        if len(objs) == 1:
            templates = _lookup(_FACT_TEMPLATES, rel, kind)
            obj_text = names[0]
        else:
            templates = _lookup(_FACT_TEMPLATES, f"{rel}/2", kind)
            obj_text = ", ".join(names[:-1]) + " and " + names[-1]
        if rel == "born_in":
            year = attr["birth_year"]
        elif rel == "spouse":
            year = attr["married_year"]
        elif rel == "founded":
            year = attrs[objs[0]]["founding_year"]
        elif rel == "educated_at":
            year = attr["birth_year"] + 21 + draws.index(4)
        elif rel == "employer":
            year = attr["birth_year"] + 24 + draws.index(20)
        elif rel == "mayor":
            year = min(attrs[objs[0]]["birth_year"] + 35 + draws.index(25), 2020)
        elif rel == "headquartered_in":
            year = attr["founding_year"] + draws.index(30)
        else:
            year = attr.get("year", attr.get("founding_year", ""))
        return render(draws.pick(templates), lead, {"O": obj_text, "year": year})


# ---------------------------------------------------------------------------------------------------------
# Convenience
# ---------------------------------------------------------------------------------------------------------


def make_synthetic(
    num_entities: int = 2000,
    seed: int = 0,
    hops: int | tuple[int, ...] = (1, 2, 3),
    split: Literal["train", "test"] = "train",
    num_questions: int = 1000,
) -> tuple[Corpus, list[QARecord]]:
    """The corpus and `num_questions` questions of the world `WorldConfig(num_entities, seed)`.

    `seed` seeds both the world and the question draws.
    """
    world = SyntheticWorld.generate(WorldConfig(num_entities=num_entities, seed=seed))
    return world.corpus, world.questions(QuestionConfig(hops=hops, num_questions=num_questions, split=split,
                                                        seed=seed))
