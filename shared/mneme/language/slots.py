"""The subjects a statement can be about ("slots": home, employer, manager, rent…), each by the words that
say a statement is about it, whether it holds one value at a time, its value words, and whether it is a
person's or a thing's. The lexicon `mneme.language.changes` reads statements with."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Slot:
    name: str
    cues: re.Pattern[str]  # words that say a statement is about this subject
    single: bool = True  # one value at a time: another value is a change
    values: frozenset[str] = frozenset()  # lower-case value words of the slot ("vegan", "vegetarian")
    numeric: bool = False  # its values may be numbers (an amount, a time, a version), not only names
    personal: bool = True  # a person's (home, job, diet); else a thing's (a framework, a deadline), shared work


def _slot(name: str, *cues: str, values: str = "", flags: str = "") -> Slot:
    """A slot from its cue patterns; `flags`: `many` (many values at a time), `numeric`, `thing` (not personal)."""
    pattern = re.compile(rf"\b(?:{'|'.join(cues)})\b")
    return Slot(name, pattern, "many" not in flags, frozenset(values.split()), "numeric" in flags, "thing" not in flags)


# fmt: off
SLOTS: tuple[Slot, ...] = (
    _slot("home", r"li(?:ve|ves|ved|ving) (?:in|at|near|with|on|here|there)",
          r"mov(?:e|ed|ing) (?:to|into|back|out|house|away|in)", r"relocat\w*", r"flat(?! rate| tyre| tire)",
          "apartment", "address", r"neighbou?rhood", "based in",
          "home ?town", "residents?", "(?:got|picked up|collected) the keys", "moved in",
          "(?:new|our|my) (?:place|house|home)",
          "(?:one|two|three)-bed", "house in", "rent(?:ing)? a"),
    _slot("employer",
          r"work(?:s|ed|ing)? (?:(?:nights|days|shifts|weekends|late|full-time|part-time|remotely|still) )?(?:at|for)",
          r"(?:my|our|new|current|old|his|her|their|a|the) (?:[\w-]+ ){0,2}job", "employer",
          "(?:my|our|new|current|his|her|their) (?:company|firm)", "joined", "hired", r"start(?:s|ed|ing)? at",
          "(?:first|last|final) (?:day|shift|week) (?:at|as|with)",
          r"(?:i'm|i am|he's|she's|he is|she is) an? (?:[\w-]+ ){1,2}(?:at|for)",
          "resigned", "quit", r"freelanc\w*", "laid off", r"redundan\w*",
          r"(?:hand|handed|handing|hands|gave|give|giving|put) in (?:my|his|her|their|our) notice", "notice period",
          "signed (?:on )?with", "job offer",
          r"offer(?:ed|s)? (?:me |him |her |them |us )?(?:the|a|an) (?:[\w-]+ ){0,3}job"),
    _slot("role", "role", "position", "title", r"promot\w*", r"work(?:s|ed|ing)? as", "career", "part-time",
          "full-time", "contract(?:or)?",
          values="junior senior lead principal chief head trainee apprentice intern associate deputy assistant"),
    _slot("manager", "manager", "boss", "supervisor", "report(?:s|ing)? to", "team lead", "answer(?:s|ing)? to",
          "(?:sit|sits|sitting|work|works|working) under"),
    _slot("diet", "diet", "vegetarian", "vegan", "pescatarian", "meat", "keto", "eat(?:s|ing)?", "plant-based",
          r"(?:dairy|gluten)(?![ -]?(?:intoleran|allerg|sensitiv))",
          values="vegetarian vegan pescatarian keto paleo omnivore carnivore gluten-free dairy-free halal kosher"),
    # what a body cannot take is no choice of diet: "not vegan any more" leaves "lactose intolerant" standing
    _slot("allergy", r"allerg\w*", r"intoleran\w*", "coeliac", "celiac", "lactose", r"sensitiv\w* to",
          r"anaphyla\w*", "epipen", flags="many"),
    _slot("phone", "phone", "mobile", "iphone", "android", "pixel", "samsung", "(?:my|new|phone|mobile) number",
          flags="numeric"),
    _slot("school", "school", "university", "uni", "college", "(?<!of )course", "degree", "studying", "stud(?:y|ies)",
          "enrolled", "masters?", "phd", "bootcamp", "juniors", "infants", "nursery", "primary", "secondary",
          "sixth form", r"year \d+"),
    _slot("supplier", "supplier", "vendor", "provider", "suppl(?:y|ies)", "wholesaler", "distributor", "agency",
          r"(?:order|buy|get|source)(?:s|ing)? (?:[\w-]+ ){0,3}from", "deliver(?:y|ies|ed)? from",
          "signed (?:up )?with", flags="thing"),
    _slot("tool", "tool", "app", "software", "editor", "ide", "tracker", "crm", "platform", "using", "use[sd]?",
          r"migrat\w*", "hosted on", "hosting", "switch(?:ed|ing)? (?:from|to|over)", flags="many thing"),
    _slot("framework", "framework", "library", "stack", "built (?:on|with|in)", "written in", r"rewrit\w*", "react",
          "vue", "angular", "svelte", "django", "rails", "flask", "fastapi", "laravel", flags="thing"),
    _slot("money", "budget", "rent", "landlord", "lease", "salary", "pay (?:rise|raise|cut)", "price", "costs?", "fee",
          "(?:hourly|day) rate", "rate is", "charged?", "subscription", "mortgage", "earn(?:s|ing)?",
          r"on [£$€]\s?\d[\d,.]*k?", r"\d[\d,.]*k? (?:a|per) (?:year|annum|hour)", flags="numeric"),
    _slot("version", "version", r"upgrad\w*", r"downgrad\w*", r"v\d[\w.]*", flags="numeric thing"),
    _slot("hours", "opening hours", "open(?:s|ing)? (?:at|from|until|till|on)", "clos(?:e|es|ing) (?:at|from|on)",
          "hours", "shifts?", flags="numeric thing"),
    _slot("schedule", "meetings?", "stand-?ups?", "syncs?", "calls", "appointments?", r"reschedul\w*", "1:1s?",
          "one-on-ones?", "retros?", "lessons?", "classes", flags="numeric thing"),
    _slot("deadline", "deadline", "due", "launch", r"go(?:es|ing)?[- ]live", "went live", "(?:release|new|target) date",
          "delivery", "cutover",
          "ship(?:s|ping)?", "slip(?:s|ped)?(?! up)", r"postpon\w*", r"delay\w*", "pushed", "brought forward",
          "moved (?:up|back)", flags="numeric thing"),
    _slot("owner", "(?<!my )(?<!our )(?<!their )(?<!his )(?<!her )own(?:s|ed|er|ership)?", "in charge", "responsible",
          "lead(?:s|ing)? (?:the|on)", "runs the", r"hand(?:ed|ing|s)? (?:[\w-]+ ){0,4}(?:over|off)",
          "t(?:ook|aking|akes) over", "point person", "assigned", "accountable", "maintainer", flags="thing"),
    _slot("pet", "dog", "cat", "puppy", "kitten", "pets?", "rabbit", "hamster", "parrot", "horse", "tortoise",
          "passed away", "put down", "adopted", "rehomed", flags="many"),
    _slot("hobby", "hobby", "took up", "taken up", "taking up", "playing", "plays?", r"practi[sc]\w*", "learning",
          "classes", "club", "gave up", flags="many"),
    _slot("name", "call(?:s|ed|ing)? (?:me|him|her|them|us)", "be called", "known as", "name", "go(?:es)? by",
          "nickname", "pronouns"),
    _slot("partner", "girlfriend", "boyfriend", "wife", "husband", "partner", "fianc[eé]e?", "married", "engaged",
          "divorced", "broke up", "separated", "dating"),
    _slot("vehicle", "car", "drive[sn]?", "driving", "vehicle", "bike", "scooter", "van"),
    _slot("provider", "bank", "insurer", "insurance", "doctor", "dentist", "gp", "gym", "broadband", "energy supplier",
          "surgery", "network", "carrier"),
)
# fmt: on
SLOT_NAMES = {slot.name: slot for slot in SLOTS}
ANY_CUE = re.compile("|".join(slot.cues.pattern for slot in SLOTS))  # a text none of it matches touches no slot
VALUE_WORDS = frozenset().union(*(slot.values for slot in SLOTS))
