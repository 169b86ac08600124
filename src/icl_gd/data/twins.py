"""Synthetic twins of the six built-in tasks: seeded, learnable, offline look-alikes of their data.

:func:`make_synthetic_task` builds a twin's train and evaluation splits with the columns of the real
task after ``data.normalise_split`` (the template's fields, ``label``, ``example_id``), so the whole
workflow runs offline, in seconds, and in tests, without knowing the data is not real. The label
follows from the words (sentiment, intensity, opinion phrasing, topic vocabulary, negation), so
in-context learning and finetuning have something to learn; the built-in model is pretrained on
the twins' train splits.

This module imports only ``data.presets`` and ``common.specs`` from the package (the tasks' templates
and label words).
"""

from __future__ import annotations

import re
import zlib

import numpy as np
import pandas as pd

from icl_gd.common.specs import template_fields
from icl_gd.data.presets import TASK_PRESETS

# Share of rows whose text holds a newline: the protocol turns a newline into </s>, and the
# pipeline has to meet some.
NEWLINE_RATE = 0.03

# Each twin is a set of sentence frames with ``{slot}`` placeholders; every slot occurrence is filled
# with a fresh draw from the pool of that name (trailing digits are ignored, so ``{adj2}`` draws from
# ``adj``). Class-specific pools carry the label; shared pools (nouns, fillers, places) add variety
# that says nothing of the label. The frames are the same for every class wherever possible, so that
# the label follows from the words and not from the sentence shape.

_FILM_NOUNS = [
    "film",
    "movie",
    "story",
    "script",
    "cast",
    "performance",
    "picture",
    "plot",
    "dialogue",
    "soundtrack",
    "ending",
    "screenplay",
    "heroine",
    "cinematography",
    "premise",
    "lead",
    "comedy",
    "drama",
    "thriller",
    "sequel",
    "documentary",
    "romance",
    "narrative",
    "direction",
    "pacing",
    "humor",
    "score",
    "camera work",
    "editing",
    "finale",
]
# Adverbs that fit before an adjective ("is {filler} {adj}"), and openers that start a sentence.
_FILLERS = [
    "really",
    "quite",
    "just",
    "somehow",
    "mostly",
    "often",
    "still",
    "also",
    "frankly",
    "simply",
    "largely",
    "at times",
    "consistently",
    "oddly",
]
_OPENERS = [
    "overall",
    "frankly",
    "in the end",
    "at times",
    "by the end",
    "from the start",
    "on the whole",
    "in short",
    "for the most part",
    "as it turns out",
]
_POS_ADJ = [
    "wonderful",
    "brilliant",
    "moving",
    "charming",
    "delightful",
    "gripping",
    "heartfelt",
    "beautiful",
    "clever",
    "funny",
    "engaging",
    "touching",
    "stunning",
    "superb",
    "witty",
    "thoughtful",
    "excellent",
    "enjoyable",
    "fresh",
    "inspiring",
    "powerful",
    "memorable",
    "smart",
    "warm",
    "rewarding",
    "compelling",
    "elegant",
    "lovely",
    "refreshing",
    "entertaining",
    "good",
    "great",
]
_NEG_ADJ = [
    "dull",
    "boring",
    "tedious",
    "clumsy",
    "bland",
    "awful",
    "lifeless",
    "predictable",
    "pointless",
    "tiresome",
    "flat",
    "messy",
    "shallow",
    "forgettable",
    "painful",
    "sloppy",
    "stale",
    "weak",
    "lazy",
    "dreary",
    "confusing",
    "annoying",
    "unfunny",
    "hollow",
    "bloated",
    "dreadful",
    "mediocre",
    "tired",
    "silly",
    "incoherent",
    "bad",
    "terrible",
]
_POS_VP = [
    "kept me smiling",
    "won me over",
    "left me deeply moved",
    "deserves a wide audience",
    "is worth seeing twice",
    "works beautifully",
    "soars",
    "delivers on every promise",
    "rewards patience",
    "lingers in the memory",
    "sparkles",
    "hits every note",
    "earns its emotions",
    "feels alive",
    "never loses its charm",
]
_NEG_VP = [
    "put me to sleep",
    "wastes its talented cast",
    "falls apart",
    "drags on forever",
    "never takes off",
    "misses the mark",
    "goes nowhere",
    "wears out its welcome",
    "feels endless",
    "collapses in the last act",
    "grates on the nerves",
    "leaves no impression",
    "insults the audience",
    "tries too hard",
    "runs out of ideas",
]

_SENTIMENT_POOLS = {
    0: {"adj": _NEG_ADJ, "vp": _NEG_VP, "cadj": _POS_ADJ},  # cadj: a contrasting word, outvoted
    1: {"adj": _POS_ADJ, "vp": _POS_VP, "cadj": _NEG_ADJ},
}
_GENRES = [
    "comedies",
    "dramas",
    "thrillers",
    "romances",
    "documentaries",
    "westerns",
    "musicals",
    "horror films",
    "family films",
    "war films",
    "mysteries",
    "biopics",
]
_SENTIMENT_SHARED = {"noun": _FILM_NOUNS, "filler": _FILLERS, "opener": _OPENERS, "genre": _GENRES}

_SST2_FRAMES = [
    "the {noun} is {adj} and {filler} {adj} .",
    "a {adj} , {filler} {adj} {noun} that {vp} .",
    "{opener} , the {noun} {vp} .",
    "this {adj} {noun} {vp} , and the {noun} is {filler} {adj} .",
    "it 's a {adj} {noun} with a {adj} {noun} .",
    "in the end , even the {noun} of this {noun} {vp} .",
    "despite a {cadj} {noun} , the {noun} is {adj} and {adj} .",
    "{adj} , {adj} and {filler} {adj} .",
]
_MR_FRAMES = [
    "as {genre} go , it is {adj} , {adj} and {filler} {adj} .",
    "the director 's {adj} approach to the {noun} {vp} .",
    "a {adj} {noun} whose {noun} {vp} .",
    "if you like {genre} , this {adj} one {vp} .",
    "the {noun} {vp} , and the {noun} is {filler} {adj} from start to finish .",
    "for all its {cadj} moments , the {noun} is {adj} and it {vp} .",
    "{filler} {adj} , the kind of {noun} that {vp} .",
    "the {noun} feels {adj} , the {noun} {adj} , and the whole thing {vp} .",
]

_SST5_ADJ = {
    0: [
        "awful",
        "dreadful",
        "horrible",
        "atrocious",
        "abysmal",
        "unwatchable",
        "excruciating",
        "disastrous",
        "appalling",
        "insufferable",
        "wretched",
        "miserable",
        "worthless",
        "hideous",
        "terrible",
        "unbearable",
        "ghastly",
        "embarrassing",
        "painful",
        "inept",
    ],
    1: [
        "dull",
        "weak",
        "flawed",
        "tedious",
        "disappointing",
        "bland",
        "clumsy",
        "uneven",
        "forgettable",
        "lackluster",
        "sluggish",
        "shallow",
        "stale",
        "muddled",
        "tiresome",
        "bad",
        "underwhelming",
        "predictable",
        "thin",
        "sloppy",
    ],
    2: [
        "ordinary",
        "average",
        "passable",
        "standard",
        "conventional",
        "familiar",
        "modest",
        "routine",
        "middling",
        "uneventful",
        "plain",
        "unremarkable",
        "serviceable",
        "straightforward",
        "typical",
        "moderate",
        "acceptable",
        "competent",
        "fair",
        "neutral",
    ],
    3: [
        "enjoyable",
        "solid",
        "pleasant",
        "likeable",
        "charming",
        "engaging",
        "satisfying",
        "amusing",
        "nice",
        "appealing",
        "agreeable",
        "fun",
        "good",
        "entertaining",
        "sweet",
        "clever",
        "diverting",
        "watchable",
        "warm",
        "winning",
    ],
    4: [
        "brilliant",
        "masterful",
        "superb",
        "stunning",
        "extraordinary",
        "magnificent",
        "outstanding",
        "exhilarating",
        "dazzling",
        "sublime",
        "breathtaking",
        "flawless",
        "remarkable",
        "great",
        "triumphant",
        "glorious",
        "phenomenal",
        "spectacular",
        "unforgettable",
        "exquisite",
    ],
}
_SST5_ADV = {
    0: ["utterly", "completely", "truly", "thoroughly", "painfully", "hopelessly"],
    1: ["rather", "somewhat", "fairly", "a bit", "slightly", "too often"],
    2: ["mostly", "largely", "more or less", "basically", "generally", "reasonably"],
    3: ["quite", "pretty", "genuinely", "consistently", "often", "nicely"],
    4: ["absolutely", "truly", "simply", "wonderfully", "utterly", "stunningly"],
}
_SST5_VP = {
    0: [
        "is a complete waste of time",
        "should be avoided at all costs",
        "made me want to walk out",
        "is an insult to the audience",
        "is a total disaster",
        "has no redeeming qualities",
    ],
    1: [
        "never quite works",
        "falls short",
        "loses its way",
        "runs out of steam",
        "disappoints more than it pleases",
        "feels half finished",
    ],
    2: [
        "does what it sets out to do",
        "is about what you would expect",
        "passes the time",
        "is neither here nor there",
        "follows a familiar path",
        "is fine for a rainy afternoon",
    ],
    3: [
        "is worth a look",
        "mostly works",
        "has its charms",
        "is a pleasant surprise",
        "keeps you entertained",
        "earns a recommendation",
    ],
    4: [
        "is a triumph",
        "deserves every award",
        "is not to be missed",
        "is a true masterpiece",
        "will be remembered for years",
        "is the best of the year",
    ],
}
_SST5_FRAMES = [
    "the {noun} is {adv} {adj} .",
    "a {adj} {noun} that {vp} .",
    "{adv} {adj} , the {noun} {vp} .",
    "the {noun} feels {adj} and the {noun} is {adv} {adj} .",
    "it 's a {adj} {noun} , and it {vp} .",
    "with its {adj} {noun} , this {noun} {vp} .",
    "{opener} , the {noun} {vp} .",
]

_SUBJ_OBJECTIVE = {
    "person": [
        "young teacher",
        "retired detective",
        "farmer",
        "nurse",
        "journalist",
        "soldier",
        "student",
        "widow",
        "musician",
        "doctor",
        "lawyer",
        "fisherman",
        "painter",
        "engineer",
        "mechanic",
        "pilot",
        "baker",
        "librarian",
        "boxer",
        "priest",
        "shopkeeper",
        "taxi driver",
    ],
    "place": [
        "paris",
        "chicago",
        "a small town",
        "the countryside",
        "new york",
        "london",
        "tokyo",
        "a remote island",
        "the desert",
        "the mountains",
        "a fishing village",
        "berlin",
        "mexico",
        "a coastal city",
        "the suburbs",
        "rome",
        "an old farm",
    ],
    "move": [
        "moves",
        "travels",
        "returns",
        "relocates",
        "escapes",
        "is sent",
        "heads",
        "drives",
        "flees",
        "sails",
    ],
    "event": [
        "the war",
        "her father 's death",
        "the accident",
        "the election",
        "a long trial",
        "the divorce",
        "the flood",
        "his release from prison",
        "the robbery",
        "the wedding",
        "a bankruptcy",
        "the strike",
    ],
    "year": ["1946", "1958", "1963", "1971", "1984", "1990", "1999", "2003", "the 1920s", "the 1960s"],
    "act": [
        "meets a stranger",
        "opens a small shop",
        "joins the police",
        "finds a job at a factory",
        "takes care of his brother",
        "searches for her missing sister",
        "starts a band",
        "investigates a murder",
        "learns to fly",
        "rebuilds the family house",
    ],
    "name": ["anna", "peter", "maria", "jack", "sofia", "tom", "elena", "david", "lucy", "sam"],
}
_SUBJ_SUBJECTIVE = {
    "opener": [
        "i think",
        "frankly ,",
        "honestly ,",
        "in my opinion ,",
        "i must say",
        "to me ,",
        "i felt that",
        "surely",
        "admittedly ,",
        "i suspect",
        "i believe",
        "personally ,",
    ],
    "oadj": _POS_ADJ + _NEG_ADJ,
    "oadv": [
        "wonderfully",
        "painfully",
        "oddly",
        "strangely",
        "gloriously",
        "sadly",
        "wildly",
        "deeply",
        "hopelessly",
        "delightfully",
        "annoyingly",
        "absurdly",
    ],
    "feel": [
        "love",
        "hate",
        "admire",
        "resent",
        "enjoy",
        "dislike",
        "forgive",
        "adore",
        "trust",
    ],
}
_SUBJ_FRAMES = {
    0: [
        "the story follows a {person} who {move} to {place} in {year} .",
        "{name} , a {person} from {place} , {act} after {event} .",
        "in {year} , a {person} {act} in {place} .",
        "after {event} , {name} {move} to {place} and {act} .",
        "set in {place} during {year} , the film follows a {person} who {act} .",
        "{name} {act} , while a friend {move} to {place} .",
    ],
    1: [
        "{opener} the {noun} is {oadj} , {oadj} and {oadv} {oadj} .",
        "{opener} it 's hard not to {feel} a {noun} this {oadj} .",
        "what a {oadv} {oadj} {noun} ; {opener} i {feel} it .",
        "{opener} nobody could {feel} such a {oadj} {noun} .",
        "the {noun} is {oadv} {oadj} , and {opener} that is the point .",
        "{opener} this is the most {oadj} {noun} i have seen in years .",
    ],
}

_AGNEWS_POOLS = {
    0: {  # World
        "ent": [
            "The prime minister",
            "Rebel forces",
            "The United Nations",
            "Peace negotiators",
            "The foreign ministry",
            "Election officials",
            "Government troops",
            "The embassy",
            "Protesters",
            "The parliament",
            "The president",
            "Militants",
            "Aid agencies",
            "The opposition leader",
            "NATO commanders",
            "Refugees",
        ],
        "verb": [
            "condemned",
            "negotiated",
            "signed",
            "rejected",
            "demanded",
            "welcomed",
            "called for",
            "denounced",
            "approved",
            "protested against",
        ],
        "obj": [
            "a ceasefire agreement",
            "the border dispute",
            "new sanctions",
            "a peace treaty",
            "refugee aid",
            "the disputed election",
            "the nuclear talks",
            "the military offensive",
            "a hostage release",
            "the new constitution",
            "the troop withdrawal",
            "a state of emergency",
        ],
        "place": [
            "Baghdad",
            "Gaza",
            "Kabul",
            "Moscow",
            "Beijing",
            "Nairobi",
            "Jakarta",
            "Tehran",
            "Kiev",
            "Damascus",
            "Darfur",
            "Islamabad",
            "Jerusalem",
            "Caracas",
        ],
    },
    1: {  # Sports
        "ent": [
            "The Yankees",
            "The Red Sox",
            "The Lakers",
            "The striker",
            "The quarterback",
            "The head coach",
            "The Olympic champion",
            "The tennis star",
            "Manchester United",
            "The defending champions",
            "The home team",
            "The veteran pitcher",
            "The goalkeeper",
            "The Patriots",
            "The sprinter",
            "The golfer",
        ],
        "verb": [
            "defeated",
            "beat",
            "edged",
            "rallied past",
            "clinched",
            "won",
            "lost",
            "tied",
            "dominated",
            "routed",
        ],
        "obj": [
            "the rival team",
            "a playoff berth",
            "the championship",
            "the title game",
            "the gold medal",
            "the World Series opener",
            "the season finale",
            "the semifinal",
            "the league leaders",
            "the final round",
            "a record fourth title",
            "the Super Bowl",
        ],
        "place": [
            "Athens",
            "Fenway Park",
            "Wimbledon",
            "the Olympic stadium",
            "Yankee Stadium",
            "Augusta",
            "Old Trafford",
            "the home arena",
            "the Rose Bowl",
            "Melbourne Park",
        ],
    },
    2: {  # Business
        "ent": [
            "The central bank",
            "The airline",
            "The automaker",
            "The retailer",
            "Investors",
            "The chief executive",
            "Shareholders",
            "The oil company",
            "The insurer",
            "Wall Street",
            "The Federal Reserve",
            "The bank",
            "Analysts",
            "The drug maker",
            "Exporters",
        ],
        "verb": [
            "reported",
            "cut",
            "raised",
            "posted",
            "slashed",
            "forecast",
            "boosted",
            "lowered",
            "announced",
            "sold",
        ],
        "obj": [
            "interest rates",
            "quarterly earnings",
            "its profit forecast",
            "a takeover bid",
            "thousands of jobs",
            "its dividend",
            "record sales",
            "crude oil prices",
            "a merger deal",
            "third quarter profit",
            "its stock price",
            "pension costs",
        ],
        "place": [
            "New York",
            "London",
            "Tokyo",
            "Frankfurt",
            "Chicago",
            "Detroit",
            "Hong Kong",
            "the stock exchange",
            "the bond market",
            "Zurich",
        ],
    },
    3: {  # Technology
        "ent": [
            "Microsoft",
            "Google",
            "Apple",
            "IBM",
            "Intel",
            "Researchers",
            "NASA scientists",
            "The software maker",
            "The chipmaker",
            "Hackers",
            "Sony",
            "Yahoo",
            "Engineers",
            "The search engine",
            "Astronomers",
            "The phone maker",
        ],
        "verb": [
            "released",
            "unveiled",
            "patched",
            "launched",
            "developed",
            "tested",
            "designed",
            "upgraded",
            "demonstrated",
            "introduced",
        ],
        "obj": [
            "a new search engine",
            "a security update",
            "faster processors",
            "a music download service",
            "broadband internet",
            "a spam filter",
            "the web browser",
            "a space probe",
            "wireless networks",
            "the operating system",
            "a handheld computer",
            "a desktop software",
        ],
        "place": [
            "Silicon Valley",
            "Redmond",
            "San Jose",
            "Seattle",
            "Cupertino",
            "the research lab",
            "the Mars mission",
            "the developer conference",
            "the trade show",
            "the Internet",
        ],
    },
}
_AGNEWS_SHARED = {
    "day": ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"],
    "agency": ["Reuters", "AP", "AFP", "CP"],
    "source": ["Reuters", "AP", "AFP", "officials", "a spokesman", "the report", "sources"],
}
_AGNEWS_FRAMES = [
    "{ent} {verb} {obj} in {place} on {day} , {source} said .",
    "{place} - {ent} {verb} {obj} on {day} .",
    "{ent} {verb} {obj} as {ent2} {verb2} {obj2} .",
    "{ent} {verb} {obj} in {place} , {source} said on {day} .",
    "{place} ({agency}) - {ent} {verb} {obj} , and {ent2} {verb2} {obj2} in {place2} .",
]

# cb: (word, synonym, antonym) triples for the fact a premise states, with nouns the word fits.
_CB_FACTS = [
    (("cold", "chilly", "warm"), ["room", "water", "soup", "night", "wind"]),
    (("large", "huge", "small"), ["house", "garden", "crowd", "box", "field"]),
    (("happy", "glad", "sad"), ["child", "neighbour", "driver", "bride", "teacher"]),
    (("open", "unlocked", "closed"), ["door", "gate", "window", "shop", "drawer"]),
    (("quiet", "silent", "noisy"), ["street", "classroom", "engine", "party", "office"]),
    (("empty", "vacant", "full"), ["bottle", "hotel", "train", "theatre", "box"]),
    (("wet", "damp", "dry"), ["towel", "grass", "floor", "coat", "road"]),
    (("old", "ancient", "new"), ["bridge", "church", "map", "car", "tower"]),
    (("fast", "quick", "slow"), ["train", "horse", "boat", "runner", "car"]),
    (("clean", "spotless", "dirty"), ["kitchen", "shirt", "floor", "car", "bathroom"]),
    (("safe", "secure", "dangerous"), ["road", "bridge", "neighbourhood", "ladder", "plan"]),
    (("rich", "wealthy", "poor"), ["family", "banker", "village", "farmer", "landlord"]),
    (("easy", "simple", "difficult"), ["test", "task", "puzzle", "exam", "climb"]),
    (("bright", "shiny", "dark"), ["room", "lamp", "sky", "hallway", "screen"]),
    (("tired", "exhausted", "rested"), ["nurse", "driver", "dog", "student", "farmer"]),
    (("angry", "furious", "calm"), ["customer", "manager", "crowd", "father", "coach"]),
    (("correct", "right", "wrong"), ["answer", "address", "report", "figure", "date"]),
    (("early", "premature", "late"), ["train", "meeting", "letter", "flight", "delivery"]),
    (("cheap", "inexpensive", "costly"), ["hotel", "ticket", "repair", "dinner", "car"]),
    (("broken", "damaged", "working"), ["radio", "clock", "phone", "heater", "elevator"]),
]
_CB_POOLS = {
    "name": [
        "Mary",
        "John",
        "Sarah",
        "Michael",
        "Emma",
        "David",
        "Laura",
        "James",
        "Alice",
        "Robert",
        "Helen",
        "Frank",
        "Nora",
        "Paul",
        "Grace",
        "Henry",
    ],
    "context": [
        "It was late in the evening .",
        "The meeting had gone on for hours .",
        "Nobody in the room said a word .",
        "She looked out of the window for a while .",
        "They had been driving since noon .",
        "The phone rang twice and stopped .",
        "He put down his cup and sighed .",
        "The rain had finally stopped .",
        "We waited outside the station .",
        "Everyone had already gone home .",
    ],
    "factive": [
        "knew",
        "realized",
        "noticed",
        "discovered",
        "saw",
        "remembered",
        "found out",
        "was aware",
        "learned",
        "understood",
    ],
    "nonfactive": [
        "hoped",
        "guessed",
        "wondered whether",
        "imagined",
        "suspected",
        "dreamed",
        "hoped dearly",
        "was hoping",
        "fancied",
        "half expected",
    ],
    "unrelated": [
        "{name2} owns a cat",
        "{name2} likes Italian food",
        "{name2} will travel to Spain next year",
        "{name2} has a younger brother",
        "it will snow tomorrow",
        "{name2} plays the piano",
        "the museum closes at six",
        "{name2} was born in April",
        "{name2} collects old stamps",
        "the bakery sells fresh bread",
        "{name2} is learning French",
        "the concert was sold out",
    ],
}


def _fill(frame: str, pools: dict[str, list[str]], rng: np.random.Generator) -> str:
    """Fill every ``{slot}`` of a frame with a fresh draw; ``{adj2}`` draws from ``adj`` again."""

    def draw(match: re.Match) -> str:
        pool = pools[match.group(1).rstrip("0123456789")]
        return pool[int(rng.integers(len(pool)))]

    # Pool entries may hold slots themselves (cb's unrelated hypotheses), hence a second pass.
    text = frame
    for _ in range(2):
        text = re.sub(r"\{([a-z]+[0-9]*)\}", draw, text)
    return _fix_articles(text)


def _fix_articles(text: str) -> str:
    """'a' before a vowel becomes 'an': frames only ever write 'a'."""
    return re.sub(r"\b([Aa]) (?=[aeiouAEIOU])", r"\1n ", text)


def _choice(items: list, rng: np.random.Generator):
    return items[int(rng.integers(len(items)))]


def _sentiment_row(frames: list[str]):
    def row(label: int, rng: np.random.Generator) -> dict[str, str]:
        pools = {**_SENTIMENT_SHARED, **_SENTIMENT_POOLS[label]}
        return {"text": _fill(_choice(frames, rng), pools, rng)}

    return row


def _sst5_row(label: int, rng: np.random.Generator) -> dict[str, str]:
    pools = {
        "noun": _FILM_NOUNS,
        "opener": _OPENERS,
        "adj": _SST5_ADJ[label],
        "adv": _SST5_ADV[label],
        "vp": _SST5_VP[label],
    }
    return {"text": _fill(_choice(_SST5_FRAMES, rng), pools, rng)}


def _subj_row(label: int, rng: np.random.Generator) -> dict[str, str]:
    pools = {"noun": _FILM_NOUNS, **_SUBJ_OBJECTIVE, **_SUBJ_SUBJECTIVE}
    return {"text": _fill(_choice(_SUBJ_FRAMES[label], rng), pools, rng)}


def _agnews_row(label: int, rng: np.random.Generator) -> dict[str, str]:
    pools = {**_AGNEWS_SHARED, **_AGNEWS_POOLS[label]}
    text = _fill(_choice(_AGNEWS_FRAMES, rng), pools, rng)
    # Subjects are written sentence-initial ("The airline"); mid-sentence they take a small "the".
    return {"text": re.sub(r"\b(as|and) The\b", r"\1 the", text)}


def _cb_row(label: int, rng: np.random.Generator) -> dict[str, str]:
    """A premise stating a fact, and a hypothesis it entails (0), contradicts (1) or leaves open (2).

    Entailed: a factive verb ('knew that') and the same fact, or a synonym. Contradicted: a factive
    verb and the fact negated ('not', 'never') or, less often, its antonym. Neither: an unrelated
    hypothesis, or the same fact under a non-factive verb ('hoped that').
    """
    (word, synonym, antonym), nouns = _choice(_CB_FACTS, rng)
    names = _CB_POOLS["name"]
    name = _choice(names, rng)
    pools = {**_CB_POOLS, "name2": [n for n in names if n != name]}
    noun = _choice(nouns, rng)
    context = _choice(_CB_POOLS["context"], rng)
    unrelated = label == 2 and rng.random() < 0.5
    verb = _choice(_CB_POOLS["nonfactive" if label == 2 and not unrelated else "factive"], rng)
    that = "" if verb.endswith("whether") else " that" if verb != "was aware" else " of the fact that"
    premise = f"{context} {name} {verb}{that} the {noun} was {word} ."
    if label == 0:
        hypothesis = _choice(
            [
                f"the {noun} was {word}",
                f"the {noun} was {synonym}",
                f"the {noun} was indeed {word}",
                f"{name} knew the {noun} was {word}",
            ],
            rng,
        )
    elif label == 1:
        negated = rng.random() < 0.75
        hypothesis = (
            _choice(
                [f"the {noun} was not {word}", f"the {noun} was never {word}", f"the {noun} was not {synonym}"], rng
            )
            if negated
            else f"the {noun} was {antonym}"
        )
    else:
        hypothesis = _fill(_choice(_CB_POOLS["unrelated"], rng), pools, rng) if unrelated else f"the {noun} was {word}"
    return {"premise": _fix_articles(premise), "hypothesis": hypothesis}


_SYNTHETIC_ROWS = {
    "sst2": _sentiment_row(_SST2_FRAMES),
    "sst5": _sst5_row,
    "mr": _sentiment_row(_MR_FRAMES),
    "subj": _subj_row,
    "agnews": _agnews_row,
    "cb": _cb_row,
}


def _add_newline(text: str, rng: np.random.Generator) -> str:
    """Turn one space, away from both ends, into a newline: the case the prompt builder must handle."""
    spaces = [i for i, ch in enumerate(text) if ch == " "]
    if len(spaces) < 3:
        return text
    at = spaces[int(rng.integers(1, len(spaces) - 1))]
    return text[:at] + "\n" + text[at + 1 :]


def _synthetic_split(task: str, n: int, rng: np.random.Generator) -> pd.DataFrame:
    fields = template_fields(TASK_PRESETS[task]["template"])
    n_labels = len(TASK_PRESETS[task]["label_words"])
    # Balanced up to one row per class, then shuffled: roughly balanced whatever n is.
    labels = rng.permutation(np.arange(n) % n_labels)
    make_row = _SYNTHETIC_ROWS[task]
    columns: dict[str, list] = {name: [] for name in fields}
    for label in labels:
        row = make_row(int(label), rng)
        # The single-field twins produce "text"; rename it to the template's field (sst2: sentence).
        if list(row) == ["text"]:
            row = {fields[0]: row["text"]}
        if rng.random() < NEWLINE_RATE:
            row[fields[0]] = _add_newline(row[fields[0]], rng)
        for name in fields:
            columns[name].append(row[name])
    frame = pd.DataFrame(columns)
    frame["label"] = labels.astype(np.int64)
    frame["example_id"] = np.arange(n, dtype=np.int64)
    return frame


def make_synthetic_task(task: str, n_train: int, n_eval: int, seed: int) -> dict[str, pd.DataFrame]:
    """A seeded, learnable twin of a built-in task: ``{"train": df, "eval": df}``.

    The frames have the normalised columns of the real task (the template's fields, ``label``,
    ``example_id``), so every stage of the workflow can run offline and in tests without knowing it
    is not real data. The label follows from the words (sentiment, intensity, opinion phrasing, topic
    vocabulary, negation), so in-context learning and fine-tuning have something to learn.

    Deterministic: the same arguments give identical frames. Each split has its own random stream,
    derived from (seed, task, split), so the evaluation split does not change with ``n_train``.
    About 3% of the rows hold a newline inside their (first) text field.
    """
    if task not in _SYNTHETIC_ROWS:
        raise ValueError(
            f"no synthetic twin for task {task!r}; known synthetic tasks: {sorted(_SYNTHETIC_ROWS)}. "
            "Use one of them, or give the task a 'hub' or 'local' source."
        )
    for name, n in (("n_train", n_train), ("n_eval", n_eval)):
        if int(n) < 1:
            raise ValueError(f"synthetic task {task!r}: {name} must be at least 1, got {n}")
    # crc32, not hash(): Python salts string hashes per process.
    root = np.random.SeedSequence([int(seed), zlib.crc32(task.encode())])
    train_seq, eval_seq = root.spawn(2)
    return {
        "train": _synthetic_split(task, int(n_train), np.random.default_rng(train_seq)),
        "eval": _synthetic_split(task, int(n_eval), np.random.default_rng(eval_seq)),
    }
