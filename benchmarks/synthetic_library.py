"""A synthetic code library of varied topics, and tasks that need one of its functions, made deterministically.

Each function has a name made of a verb, a quantity and a subject of its topic, a signature and a docstring saying what
it does. A task is the docstring of one function said another way: synonyms for some words, other word forms, the
words in another order, and the function's name never given. The paraphrase table is used only here (the index never
sees it), so a task found is found by the words it shares with the docstring.
"""

from __future__ import annotations

import random
import re
from typing import Dict, List, NamedTuple, Tuple

TOPICS: Dict[str, Tuple[List[str], List[str]]] = {
    # topic: (subjects, quantities)
    "weather": (
        ["rainfall", "temperature", "humidity", "wind_speed", "snow_depth", "cloud_cover"],
        ["daily", "monthly", "seasonal", "hourly"],
    ),
    "finance": (
        ["stock_price", "dividend", "interest_rate", "portfolio", "exchange_rate", "bond_yield"],
        ["average", "volatility", "return", "drawdown"],
    ),
    "text": (
        ["sentence", "paragraph", "keyword", "word_count", "hashtag", "email_address"],
        ["frequency", "length", "duplicates", "language"],
    ),
    "images": (
        ["pixel", "thumbnail", "histogram", "brightness", "contrast", "color_palette"],
        ["mean", "resized", "grayscale", "edges"],
    ),
    "geometry": (
        ["polygon", "triangle", "circle", "rectangle", "bounding_box", "convex_hull"],
        ["area", "perimeter", "centroid", "diagonal"],
    ),
    "statistics": (
        ["sample", "distribution", "outlier", "percentile", "correlation", "histogram_bins"],
        ["median", "variance", "skewness", "confidence"],
    ),
    "dates": (
        ["timestamp", "weekday", "holiday", "timezone", "calendar_week", "business_day"],
        ["next", "previous", "difference", "format"],
    ),
    "files": (
        ["csv_file", "json_file", "directory", "file_size", "checksum", "archive"],
        ["largest", "recent", "total", "hidden"],
    ),
    "networking": (
        ["ip_address", "port", "url", "http_header", "dns_record", "latency"],
        ["valid", "open", "parsed", "slowest"],
    ),
    "biology": (
        ["dna_sequence", "protein", "gene", "codon", "mutation", "species"],
        ["gc_content", "reverse_complement", "translation", "abundance"],
    ),
    "music": (
        ["chord", "tempo", "melody", "playlist", "song_duration", "key_signature"],
        ["transposed", "longest", "average", "shuffled"],
    ),
    "sports": (
        ["match_score", "player_rating", "league_table", "goal_difference", "lap_time", "team_roster"],
        ["best", "ranking", "streak", "average"],
    ),
    "chemistry": (
        ["molecule", "molar_mass", "reaction", "ph_value", "concentration", "isotope"],
        ["balanced", "dilution", "half_life", "yield"],
    ),
    "astronomy": (
        ["planet", "orbit", "star_magnitude", "light_year", "eclipse", "moon_phase"],
        ["distance", "period", "brightest", "next"],
    ),
    "cooking": (
        ["recipe", "ingredient", "calorie", "serving", "oven_temperature", "shopping_list"],
        ["scaled", "total", "cheapest", "converted"],
    ),
    "shipping": (
        ["parcel", "shipment", "warehouse", "delivery_route", "postal_code", "freight_cost"],
        ["cheapest", "shortest", "heaviest", "estimated"],
    ),
}
VERBS = {
    "compute": "Computes",
    "find": "Finds",
    "plot": "Plots",
    "count": "Counts",
    "filter": "Filters",
    "normalize": "Normalizes",
    "summarize": "Summarizes",
    "validate": "Validates",
    "load": "Loads",
    "export": "Exports",
    "rank": "Ranks",
    "estimate": "Estimates",
    "detect": "Detects",
    "merge": "Merges",
}
CONTAINERS = [
    "a list of records",
    "a pandas DataFrame",
    "a dictionary keyed by name",
    "a CSV file's rows",
    "an iterable of values",
    "a JSON document",
]
RESULTS = ["a float", "a new list", "a dictionary", "a sorted list of pairs", "a matplotlib figure", "a string"]

# Used to paraphrase the tasks only.
SYNONYMS = {
    "computes": "calculate",
    "finds": "look up",
    "plots": "draw a chart of",
    "counts": "tally",
    "filters": "keep only",
    "normalizes": "rescale",
    "summarizes": "give an overview of",
    "validates": "check",
    "loads": "read",
    "exports": "write out",
    "ranks": "order",
    "estimates": "approximate",
    "detects": "spot",
    "merges": "combine",
    "average": "mean",
    "daily": "per day",
    "monthly": "per month",
    "hourly": "per hour",
    "records": "entries",
    "dataframe": "table",
    "returns": "gives back",
    "list": "sequence",
    "values": "numbers",
    "largest": "biggest",
    "recent": "newest",
    "cheapest": "least expensive",
    "shortest": "quickest",
    "temperature": "heat",
    "rainfall": "precipitation",
    "price": "quote",
    "picture": "image",
}


class Function(NamedTuple):
    name: str
    topic: str
    docstring: str
    code: str


def _words(identifier: str) -> str:
    return identifier.replace("_", " ")


def make_library(count: int, seed: int = 7) -> List[Function]:
    """``count`` distinct functions, the same for the same ``count`` and ``seed``."""
    rng = random.Random(seed)
    combos = [
        (topic, verb, quantity, subject)
        for topic, (subjects, quantities) in TOPICS.items()
        for verb in VERBS
        for quantity in quantities
        for subject in subjects
    ]
    rng.shuffle(combos)
    functions: List[Function] = []
    number = 0
    while len(functions) < count:
        topic, verb, quantity, subject = combos[number % len(combos)]
        round_ = number // len(combos)
        number += 1
        name = f"{verb}_{quantity}_{subject}" + (f"_v{round_ + 1}" if round_ else "")
        container, result = rng.choice(CONTAINERS), rng.choice(RESULTS)
        extra = rng.choice(
            ["", " Missing values are skipped.", " Raises ValueError on empty input.", f" Works in {topic} units."]
        )
        doc = f"{VERBS[verb]} the {_words(quantity)} {_words(subject)} of {container}.\n\nReturns {result}.{extra}"
        code = (
            f'def {name}(data, key: str = "{subject}", limit: int = {rng.randint(1, 99)}):\n'
            f'    """{doc}\n    """\n'
            f"    values = [row[key] for row in data][:limit]\n"
            f'    return {{"topic": "{topic}", "count": len(values)}}\n'
        )
        functions.append(Function(name, topic, doc, code))
    return functions


def library_source(functions: List[Function]) -> str:
    return "\n\n".join(f.code for f in functions)


def paraphrase(function: Function, rng: random.Random) -> str:
    """A task needing ``function``, said without its docstring's exact words where a synonym or another word form
    exists (each with a chance of one half) and without its name."""
    first = function.docstring.split("\n")[0].rstrip(".")
    words = []
    for word in re.findall(r"[\w']+", first):
        low = word.lower()
        if low in SYNONYMS and rng.random() < 0.5:
            words.append(SYNONYMS[low])
        elif low.endswith("s") and len(low) > 4 and rng.random() < 0.5:
            words.append(low[:-1])  # another word form
        else:
            words.append(low)
    if words and words[0] in [v.lower() for v in VERBS.values()]:
        words[0] = words[0][:-1]  # "computes" -> "compute"
    frame = rng.choice(
        [
            "I need to {}.",
            "Please {} for me.",
            "Can you {}? The data is in data.json.",
            "Goal: {}, and show me the result.",
        ]
    )
    return frame.format(" ".join(words))


def make_tasks(functions: List[Function], count: int = 50, seed: int = 11) -> List[Tuple[str, str]]:
    """``[(task, the name of the function it needs)]`` for ``count`` functions spread over the library."""
    rng = random.Random(seed)
    chosen = rng.sample(range(len(functions)), min(count, len(functions)))
    return [(paraphrase(functions[i], rng), functions[i].name) for i in chosen]
