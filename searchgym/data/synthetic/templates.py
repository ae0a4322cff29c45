"""Entity kinds, relations, and the template tables keyed by them: relation keywords, fact sentences,
and the phrasings questions use for hidden entities (`DESCRIBE`) and for the last hop (`ASK`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# ---------------------------------------------------------------------------------------------------------
# Entity kinds
# ---------------------------------------------------------------------------------------------------------

KIND_TYPE: dict[str, str] = {
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
"""The type (person, place, organisation, work) of each entity kind."""
ORG_KINDS = ("company", "university", "publisher", "studio", "label")
"""The organisation kinds."""
WORK_KINDS = ("book", "film", "album")
"""The kinds of creative work."""

# Share of the non-twin entities per kind; persons take whatever is left (about 42%).
KIND_SHARES: dict[str, float] = {
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
KIND_MINIMUM: dict[str, int] = {"country": 3}  # other kinds: 2

# The organisation kind that publishes each work kind.
PUBLISHER_KIND = {"book": "publisher", "film": "studio", "album": "label"}

# How a hidden or answer entity of a kind is called in question text.
KIND_NOUN = {
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

RELATIONS_OF: dict[str, tuple[str, ...]] = {
    "person": ("born_in", "employer", "educated_at", "spouse", "founded"),
    "city": ("located_in", "mayor"),
    "country": ("capital",),
    **{kind: ("headquartered_in", "founded_by") for kind in ORG_KINDS},
    **{kind: ("created_by", "published_by") for kind in WORK_KINDS},
}
"""The relations each kind of entity is the subject of."""

# Which of the subject's passages states each relation. Section 0 is the overview.
FACT_SECTION: dict[str, int] = {
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

RELATION_KEYWORDS: dict[_Key, str] = {
    # The word the oracle adds to the subject's name to search for the fact. It appears in every fact
    # sentence of the relation (FACT_TEMPLATES) and in no filler or intro text, so among the subject's
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
FACT_TEMPLATES: dict[_Key, tuple[str, ...]] = {
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
DESCRIBE: dict[_Key, dict[str, tuple[str, ...]]] = {
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
# in DESCRIBE.
ASK: dict[_Key, dict[str, tuple[str, ...]]] = {
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

# Asides (`QuestionConfig.aside_rate`): another fact of the start entity {S}, stated before the question, whose
# object {O} is on no hop of the chain; nothing the question asks depends on it.
ASIDES: dict[_Key, str] = {
    ("born_in", "*"): "{S} was born in {O}.",
    ("employer", "*"): "{S} works for {O}.",
    ("educated_at", "*"): "{S} studied at {O}.",
    ("spouse", "*"): "{S} is married to {O}.",
    ("founded", "*"): "{S} founded {O}.",
    ("headquartered_in", "*"): "{S} is based in {O}.",
    ("founded_by", "*"): "{S} was set up by {O}.",
    ("created_by", "book"): "{S} was written by {O}.",
    ("created_by", "film"): "{S} was directed by {O}.",
    ("created_by", "album"): "{S} was recorded by {O}.",
    ("published_by", "book"): "{S} was issued by {O}.",
    ("published_by", "film"): "{S} was produced by {O}.",
    ("published_by", "album"): "{S} was released by {O}.",
    ("located_in", "*"): "{S} lies in {O}.",
    ("capital", "*"): "the capital of {S} is {O}.",
    ("mayor", "*"): "the mayor of {S} is {O}.",
}

# How the question names the start entity, by kind.
START_REF: dict[str, str] = {"book": "the novel '{N}'", "film": "the film '{N}'", "album": "the album '{N}'"}


def template_for(table: Mapping[_Key, Any], relation: str, kind: str) -> Any:
    """`table`'s entry for `relation` and subject `kind`, else its `(relation, "*")` fallback."""
    if (relation, kind) in table:
        return table[(relation, kind)]
    return table[(relation, "*")]


def relation_keyword(relation: str, subject_kind: str) -> str:
    """The word that, with the subject's name, retrieves the passage stating `relation`."""
    return template_for(RELATION_KEYWORDS, relation, subject_kind)
