"""The claim patterns: one clause in, the (entity, property, value) it states out.

A clause reaches these rules only when it asserts something (`claims` drops questions, hedges, plans,
negations, jokes and reported speech first). Its subject is "I"/"we" (the speaker), "my sister" (the
speaker's sister), a name ("Priya"), "the gateway" (a thing, for a few rules), or "he"/"she", which
`claims` resolves from the turns before or drops. Each rule names the kind of value it expects
(`values.value`); a clause whose words fill no rule with a value of its kind yields nothing.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from mneme.consolidation.claims.values import (
    AMOUNT,
    CONDITIONS,
    DATE,
    DIETS,
    FAMILY,
    HOME_HINTS,
    INTOLERANCES,
    KIN_TITLES,
    LIVING_HINTS,
    NAME,
    SECRET,
    STAND_INS,
    TOOL_HINTS,
    WORK_HINTS,
    is_entity,
    is_property,
    known_tool,
    role,
    value,
)

HE, SHE, TOPIC, THAT = "\x00he", "\x00she", "\x00topic", "\x00that"  # entities `claims` resolves from context


class Found(NamedTuple):
    entity: str
    property: str
    value: str


FAMILY_RE = "|".join(FAMILY)
THING = r"(?:[Tt]he) [A-Za-z0-9][\w-]*(?: [a-z0-9][\w-]*){0,2}?"
SUBJECT = (
    rf"(?P<e>I|We|(?:[Mm]y|[Oo]ur) (?:{FAMILY_RE})(?: {NAME})?|{NAME}(?:'s (?:{FAMILY_RE})(?: {NAME})?)?|[Hh]e|[Ss]he)"
)
PERSON = (
    rf"(?P<e>I|(?:[Mm]y|[Oo]ur) (?:{FAMILY_RE})(?: {NAME})?|{NAME}(?:'s (?:{FAMILY_RE})(?: {NAME})?)?|[Hh]e|[Ss]he)"
)
THING_SUBJECT = rf"(?P<e>{NAME}(?:'s [a-z]+(?: [a-z]+)?)?|{THING}|[Hh]e|[Ss]he|I|We)"
ADV = r"(?: (?:have|has|just|recently|finally|now|also|all|both|actually|officially|eventually|since|still))*"
# What one keeps, and how many: "we have three kids", "I have a garden now" (not "two exams", "a cold").
KEPT_MANY = (
    "kids|children|sons|daughters|cats|dogs|sisters|brothers|cousins|grandkids|grandchildren|siblings|rabbits|"
    "chickens|horses|cars|bikes|tattoos|houses|flats|jobs|guitars|pets|twins|stepkids"
)
KEPT_ONE = (
    "garden|car|van|bike|motorbike|dog|cat|puppy|kitten|rabbit|horse|house|flat|cottage|boat|allotment|mortgage|"
    "job|boyfriend|girlfriend|partner|husband|wife|baby|son|daughter|tattoo|piano|guitar|degree|licence|license|"
    "pension|balcony|driveway"
)
PRICED = "plan|tier|subscription|membership|licence|license|package|service|app|course|contract|tariff"
HOME = (  # what one moves to when one moves house: "we moved to a bigger flat in Glasgow"
    r"(?:(?:an?|the|our|my) )?(?:(?:bigger|smaller|new|little|tiny|lovely|nice|shared|small|big|cheaper|old|"
    r"rented|[a-z]+-bed(?:room)?) )*(?:flat|house|place|apartment|home|cottage|studio|bungalow|semi|terrace|"
    r"village|town|city|suburb|area|houseboat|farm) (?:in|near|outside|just outside) "
)
BE = r"(?: am| is| are|'s)"
SOME = r"(?:an? |the |two |three |four )?(?:(?:new|little|old|rescue|tiny|big|second|baby|beautiful|gorgeous) )*"

# (property, value kind, pattern[, condition]). The value is group `v`; a pattern may also name `r` (a role:
# "works as") and `o` (an employer: "works at"), `k` (a pet's kind: "dog's name") or `h` (a plan's kind). A
# condition is a kind of talk the turn must be about for the reading to hold: "work" ("I joined Spotify"
# is a job only then), "home" ("I'm in Lyon now" says where one lives only then).
RULES: tuple[tuple[str, ...], ...] = (
    # where someone lives, and changes of it ("moved to" gives the new place)
    (
        "lives in",
        "place",
        rf"^{SUBJECT}{ADV} (?:moved|relocated)(?: back| house| home| out)? to (?:{HOME})?"
        rf"(?P<v>[A-Z].*)",
    ),
    (
        "moved",
        "name",
        rf"^{SUBJECT}{ADV} (?:moved|relocated|switched|migrated)(?: over)? from (?:the )?(?P<x>{NAME}) "
        rf"to (?P<v>.+)",
    ),
    (
        "lives in",
        "place",
        rf"^{SUBJECT}{ADV}(?: live| lives| are living| am living| is living| have lived| has lived|"
        rf" have been living| has been living) (?:in|near) (?P<v>.+)",
    ),
    ("lives in", "place", rf"^{SUBJECT}{BE}(?: now)? (?:based|living|settled) (?:in|near|out of) (?P<v>.+)"),
    ("lives in", "place", rf"^{SUBJECT}{BE} (?:now )?in (?P<v>{NAME}) now$", "home"),
    ("lives in", "place", rf"^{SUBJECT} works? remotely from (?P<v>.+)"),
    ("from", "place", rf"^{SUBJECT}{BE} (?:originally )?from (?P<v>.+)"),
    ("from", "place", rf"^{SUBJECT} (?:grew up|was born|was raised) in (?P<v>.+)"),
    # work: employer, role, both
    ("works at", "org", rf"^{SUBJECT}{BE}(?: now| also)? (?:an?|the) (?P<r>[\w'’ -]+?) (?:at|for|with) (?P<o>.+)"),
    (
        "works as",
        "role",
        rf"^{SUBJECT}{ADV}(?: work| works| am working| is working| are working) "
        rf"(?:at|for) (?P<o>.+?) as (?:an? |the )?(?P<r>.+)",
    ),
    ("works as", "org", rf"^{SUBJECT}{ADV}(?: joined| has joined| have joined) (?P<o>.+?) as (?:an? |the )?(?P<r>.+)"),
    (
        "works at",
        "org",
        rf"^{SUBJECT}{ADV}(?: work| works| am working| is working| are working| have worked| has worked|"
        rf" have been working| has been working) (?:at|for) (?P<v>.+)",
    ),
    (
        "works at",
        "org",
        rf"^{SUBJECT}{ADV}(?: work| works| am working| is working| are working) as (?:an? |the )?(?P<r>[\w'’ -]+?) "
        rf"(?:at|for|with) (?P<o>.+)",
    ),
    (
        "works at",
        "org",
        rf"^{SUBJECT}{ADV}(?: got| started| have started| began) (?:a |my )?(?:new )?"
        rf"(?:job|position|role|placement) (?:at|with|for) (?P<v>.+)",
    ),
    ("works at", "name", rf"^{SUBJECT}{ADV}(?: got hired by| was hired by) (?P<v>.+)"),
    (
        "works at",
        "name",
        rf"^{SUBJECT}{ADV}(?: joined| started at| started working at| started working for|"
        rf" have started at| signed with| signed on with| have signed with| has signed with) (?P<v>.+)",
        "work",
    ),
    # a first day somewhere, where work is talked of, says where one works now: "First day at Brightwater today"
    (
        "works at",
        "org",
        r"^(?:(?:It's|It is|It was|Today is|Today was) )?(?:[Mm]y first|First) (?:day|week|shift|morning) (?:at|with) "
        r"(?P<v>[A-Z].*)",
        "work",
    ),
    ("works as", "role", rf"^{SUBJECT}{ADV}(?: work| works| am working| is working| are working) as (?P<v>.+)"),
    ("works as", "role", rf"^{SUBJECT}{ADV}(?: got| have been| was| has been) promoted to (?P<v>.+)"),
    ("works as", "role", rf"^{SUBJECT}{BE}(?: now| also)? (?P<v>an? [\w'’ -]+?) by (?:trade|profession)"),
    ("works as", "exact-role", rf"^{SUBJECT}{BE}(?: now| also)? (?P<v>(?:an?|the) [\w'’ -]+?)(?: there| here)?$"),
    # tools and services used, and switches between them
    ("uses", "product", rf"^{SUBJECT}{ADV}(?: dropped| ditched| replaced) (?:the )?{NAME} (?:for|with) (?P<v>.+)"),
    (
        "uses",
        "product",
        rf"^{SUBJECT}{ADV}(?: moved| migrated| switched| have moved| have migrated) (?:the|our|all|all the) "
        rf"[a-z][\w -]{{1,30}}? from (?:the )?{NAME} to (?P<v>.+)",
    ),
    ("teaches", "org", rf"^{PERSON}{ADV}(?: teach| teaches) (?:at|for) (?P<v>.+)"),
    (
        "uses",
        "tool",
        rf"^{SUBJECT}{ADV}(?: switched| have switched| migrated| changed| moved over) (?:over )?to (?P<v>.+)",
    ),
    ("uses", "tool", rf"^{SUBJECT}{ADV}(?: use| uses| am using| are using| is using| rely on| relies on) (?P<v>.+)"),
    ("uses", "product", rf"^{THING_SUBJECT}{ADV}(?: uses| runs on| run on| is using) (?P<v>.+)"),
    ("uses", "product", rf"^(?P<e>{THING}|We){ADV}(?: runs| run) (?P<v>.+)"),
    (
        "uses",
        "product",
        rf"^{THING_SUBJECT}{BE}(?: now| still)? (?:on|running) (?P<v>{NAME} \d+(?:\.\d+)*|"
        rf"[a-z][\w.+-]* \d+(?:\.\d+)*)",
    ),
    # ownership of things and of work
    ("owns", "owned", rf"^{THING_SUBJECT}{ADV}(?: own| owns|{BE} (?:now )?the owner of)(?: the whole)? (?P<v>.+)"),
    ("responsible for", "owned", rf"^{THING_SUBJECT}{BE}(?: now| also)? (?:in charge of|responsible for) (?P<v>.+)"),
    # plans, prices, pay, due dates
    (
        "{h}",
        "thing",
        rf"^{SUBJECT}{BE}(?: now| still| currently)? on (?P<v>(?:the |an? )?[\w' -]*?"
        r"(?P<h>plan|tier|tariff|contract|package|subscription))\b",
    ),
    ("price", "amount", rf"^(?P<e>{NAME}|{THING} (?:{PRICED})){ADV} costs? (?P<v>.+)"),
    ("salary", "amount", rf"^{PERSON}{ADV}(?: earn| earns| am on| is on| am earning| is earning) (?P<v>.+)"),
    ("due date", "date", rf"^{THING_SUBJECT}(?: is| are|'s) due (?:on |by |in )?(?P<v>.+)"),
    ("school", "school", rf"^{PERSON}{ADV}(?: goes| go| is going) to (?P<v>.+)"),
    # the person: age, diet, allergies, conditions, languages, studies, preferences, name
    ("age", "age", rf"^{PERSON}{BE} (?P<v>\d{{1,3}})(?: years old| years of age| yo)?(?: this year| now| today)?$"),
    (
        "age",
        "age",
        rf"^{PERSON}{ADV} turned (?P<v>\d{{1,3}})(?: (?:last|this) (?:week|month|year)|"
        rf" on \w+(?: \w+)?| yesterday| in (?:\w+))?$",
    ),
    ("diet", "phrase", rf"^{SUBJECT}{BE}(?: now| also| strictly| fully| a)* (?P<v>{'|'.join(DIETS)})(?![\w-])"),
    ("diet", "phrase", rf"^{SUBJECT}{ADV}(?: went| have gone| has gone| turned) (?P<v>vegan|vegetarian|pescatarian)\b"),
    # what a body cannot take is no diet: a later "I'm vegan" does not replace "lactose intolerant"
    (
        "intolerance",
        "phrase",
        rf"^{SUBJECT}{BE}(?: also| very| severely| really| quite)* (?P<v>{'|'.join(INTOLERANCES)})(?![\w-])",
    ),
    (
        "allergic to",
        "allergen",
        rf"^{SUBJECT}{BE}(?: also| very| severely| really| quite| super)* allergic to (?P<v>.+)",
    ),
    ("has", "phrase", rf"^{SUBJECT}{ADV}(?: have| has| have got| has got) (?P<v>{'|'.join(CONDITIONS)})$"),
    ("speaks", "name", rf"^{SUBJECT}{ADV} speaks? (?P<v>.+)"),
    (
        "studies",
        "phrase",
        rf"^{SUBJECT}{BE} (?:studying|doing (?:an?|my) (?:degree|masters|master's|MSc|MA|BA|"
        rf"BSc|PhD|course|diploma) in) (?P<v>[\w ]+?)(?: at | in |$)",
    ),
    ("studies", "phrase", rf"^{SUBJECT} stud(?:y|ies) (?P<v>[\w ]+?)(?: at | in |$)"),
    ("studied", "phrase", rf"^{SUBJECT}{ADV} studied (?P<v>[\w ]+?) (?:at|in) {NAME}"),
    (
        "prefers",
        "preference",
        rf"^{SUBJECT}(?: always| generally| usually)? prefers? (?!to\b)(?P<v>.+?)"
        rf"(?: over .*| to .*| than .*| when .*| for .*| on .*)?$",
    ),
    ("name", "name", r"^(?:[Mm]y name is|[Mm]y name's|[Cc]all me|I am called|I go by) (?P<v>.+)"),
    ("married to", "name", rf"^{PERSON}{BE}(?: now)? married to (?P<v>.+)"),
    ("engaged to", "name", rf"^{PERSON}{BE}(?: now)? engaged to (?P<v>.+)"),
    ("studies at", "org", rf"^{PERSON}{BE}(?: now)? an? (?:[A-Za-z]+ )?student at (?P<v>.+)"),
    ("date of birth", "date", rf"^{PERSON} (?:was|were) born on (?P<v>.+)"),
    # pets and named things: "we got a kitten called Pickle"
    (
        "{k}'s name",
        "name",
        rf"^{SUBJECT}{ADV}(?: have| has| got| have got| has got| adopted| rescued| bought) "
        rf"{SOME}(?P<k>[a-z]+(?: [a-z]+)?) (?:called|named) (?P<v>.+)",
    ),
    # possessions in numbers: "we have three kids", "I have a garden now"
    (
        "has",
        "thing",
        rf"^{SUBJECT}{ADV}(?: have| has| have got| has got) (?P<v>(?:two|three|four|five|six|\d) "
        rf"(?:{KEPT_MANY}))$",
    ),
    ("has", "owned", rf"^{SUBJECT}{ADV}(?: have| has| have got| has got) (?P<v>an? (?:{KEPT_ONE})) now$"),
)
COMPILED = tuple((rule[0], rule[1], re.compile(rule[2]), rule[3] if len(rule) > 3 else "") for rule in RULES)
TALK = {"work": WORK_HINTS, "home": LIVING_HINTS}
CHANGE = r"(?:is|are|is now|are now|'s now|has changed to|changed to|went up to|has gone up to|rose to|increased to|" \
         r"went down to|dropped to|is going up to)"  # fmt: skip
POSSESSIVE = rf"(?P<e>[Mm]y|[Oo]ur|{NAME}(?: \d+)?'s|{THING}'s)"
POSSESSIVES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (shape, re.compile(pattern))
    for shape, pattern in (
        # "my favourite band is Wet Leg"
        ("favourite", rf"^{POSSESSIVE} (?P<p>favou?rite [a-z]+(?: [a-z]+){{0,3}}?) (?:is|are) (?P<v>.+)"),
        # "my dog is called Biscuit", "Ruth's daughter is called Ada"
        (
            "called",
            rf"^{POSSESSIVE} (?:new )?(?P<p>[a-z][\w'-]*(?: [a-z][\w'-]*){{0,2}})(?: is| are|'s) (?:called|named) "
            r"(?P<v>.+)",
        ),
        # "my mum is a teacher": a relation's job
        ("relation", rf"^{POSSESSIVE} (?P<rel>{FAMILY_RE}) (?:is|'s) (?:now )?(?P<r>an? [\w'’ -]+)$"),
        # "Pottery is my favourite way to switch off"
        (
            "favourite-of",
            rf"^(?P<v>{NAME}|[a-z][\w -]{{1,30}}?) (?:is|are) (?P<e>[Mm]y|[Oo]ur|{NAME}'s) "
            rf"(?P<p>favou?rite [a-z]+(?: [a-z]+){{0,4}})$",
        ),
        # "my manager is Aisha Rahman", "Acme's billing plan is Premium", "my rent went up to £1,020"
        ("is", rf"^{POSSESSIVE} (?:(?:new|current) )?(?P<p>[\w'-]+(?: [\w'-]+){{0,3}}?) {CHANGE} (?P<v>.+)"),
        ("is", rf"^[Tt]he (?P<p>\w[\w -]{{0,30}}?) (?:of|for) (?P<e>(?:the )?{NAME}|{THING}) {CHANGE} (?P<v>.+)"),
        # "the landlord raised the rent to £1,020": the speaker's rent, whoever's landlord it is
        (
            "own",
            r"^(?:[Mm]y|[Oo]ur|[Tt]he) (?:landlord|landlady|letting agent|agency) (?:has )?(?:raised|put up|"
            r"increased|upped) (?:the|my|our) (?P<p>rent) to (?P<v>.+)",
        ),
        # "I've put my day rate up to £520", "we cut our budget to €900": the speaker's own amount, changed
        (
            "own",
            r"^(?:I|[Ww]e)(?:'ve| have)? (?:put|pushed|bumped|raised|increased|upped|dropped|cut|lowered|reduced) "
            rf"(?:my|our) (?P<p>[a-z][\w'-]*(?: (?!up\b|down\b)[a-z][\w'-]*){{0,2}}) (?:up |down )?to "
            rf"(?P<v>(?=[£$€¥₹]|\d[\d,.]*\s?(?:k|pounds|quid|euros?|dollars)\b){AMOUNT})(?![\w,.])",
        ),
        # "the handoff deadline is Friday 7 November"; "the deadline is 14 March", "deadline 14 March" (the topic's)
        (
            "is",
            rf"^(?P<e>{THING}) (?P<p>deadline|due date|launch date|go-live date|release date|budget) (?:is|'s) "
            r"(?P<v>.+)",
        ),
        (
            "topic",
            rf"^(?:[Tt]he |[Oo]ur |[Ii]ts )?(?P<p>deadline|due date|launch date|go-live date|release date|budget)"
            rf"(?: is|'s|:)? (?P<v>(?:(?i:{DATE})|{AMOUNT})\b.*)",
        ),
    )
)
# "a greyhound called Rocket": a named thing of the kind, as a fragment (all of its clause: "a guy called
# Marco fitted it" names no one of the speaker's).
CALLED_KIND = re.compile(
    r"^an? (?:(?:very|new|little|tiny|rescue|baby|big|old|young|gorgeous|beautiful|sweet|cute|lovely|fluffy) )*"
    rf"(?P<k>[a-z]+(?: [a-z]+)?) (?:called|named) (?P<v>{NAME})\W*$"
)
# "I've got a guy called Dave coming round": someone met, not someone one has.
STRANGERS = frozenset("guy man woman bloke lad girl boy lady chap dude person fella fellow someone people".split())
NAMED_RELATION = re.compile(rf"(?:[Mm]y|[Oo]ur|{NAME}'s) (?:{FAMILY_RE}) ({NAME})")
APPOSITION = re.compile(rf"(?<![\w'])(?:(?P<my>[Mm]y|[Oo]ur)|(?P<o>{NAME})'s) (?P<rel>{FAMILY_RE}) (?P<n>{NAME})")
PERSONAL_OBJECT = re.compile(r"(?:my|our|your|his|her|their|the family|family|friends|fun|free)\b", re.I)
NOT_EMPLOYER = re.compile(r"(?:heart|the moment|home|night|nights|weekends|times|best|worst|most|least|first)\b")
PERIOD_OF_TIME = re.compile(
    r"(?:the |this |next |last )?(?:year|month|week|quarter|day|weekend|summer|winter|spring|autumn|term|"
    r"semester|season|trip|holiday|holidays|event|party|night|evening|morning)",
    re.I,
)
KIN_TITLE = re.compile(rf"^(?:{'|'.join(KIN_TITLES)}) (?=[A-Z])")
OLD = re.compile(r"\b(?:old|previous|former|ex|last)\b", re.I)


def _entity(said: str, speaker: str | None) -> str | None:
    """Who the subject names: the speaker for I/we/my/our, a placeholder for he/she, else the name itself
    ("my partner Sam" and "Tom's wife Sarah" are Sam and Sarah, by name)."""
    if named := NAMED_RELATION.fullmatch(said):
        return named[1] if is_entity(named[1]) else None
    said = KIN_TITLE.sub("", said)  # "Uncle Emeka" is Emeka
    said = re.sub(r"(?<=\w)['’]s$", "", said)  # "Orla's moved to Berlin": Orla has, not something of Orla's
    word = said.split()[0].lower() if said else ""
    if word in ("i", "we", "my", "our"):
        if not speaker:
            return None
        rest = said.split(" ", 1)[1] if word in ("my", "our") and " " in said else ""
        return f"{speaker}'s {rest}" if rest else speaker
    if word in ("he", "she"):
        return HE if word == "he" else SHE
    if re.match(r"[Tt]he ", said):
        return "the " + said[4:]
    owner, _, relation = said.partition("'s ")
    if relation:
        return f"{owner}'s {relation}" if is_entity(owner) else None
    return said if is_entity(said) else None


def _moved(said: str, before: str, after: str, hints: str) -> str | None:
    """'moved from X to Y': a switch of tools or a move of home? Known tools or tool words say the first;
    home words, or one person moving, the second; a team moving between unknown names says nothing."""
    if known_tool(before) or known_tool(after) or TOOL_HINTS.search(hints):
        return "uses"
    if HOME_HINTS.search(hints) or said.split()[0].lower() not in ("we", "our"):
        return "lives in"
    return None


def _rule_claims(clause: str, speaker: str | None, hints: str) -> list[Found]:
    out: list[Found] = []
    for prop, kind, pattern, condition in COMPILED:
        found = pattern.match(clause)
        if found and condition and not TALK[condition].search(hints):
            continue
        said = (found.groupdict().get("e") or "I") if found else ""
        if not found or not (entity := _entity(said, speaker)):
            continue
        groups = found.groupdict()
        if groups.get("r") is not None:  # a role, maybe with an employer
            job = role(groups["r"].strip())
            employer = value("org", groups["o"]) if groups.get("o") else None
            loose = re.match(r"(?:the |an? )?[a-z]", groups.get("o") or "") and not NOT_EMPLOYER.match(groups["o"])
            loose = loose and not PERSONAL_OBJECT.match(groups["o"])  # "a taxi driver for my kids"
            if job and (employer or prop == "works as" or loose):  # "joined the team as a platform engineer"
                out.append(Found(entity, "works as", job))
                if employer:
                    out.append(Found(entity, "works at", employer))
            continue
        if prop == "moved":
            prop = _moved(said, groups["x"], groups["v"], hints) or ""
            kind = "product" if prop == "uses" else "place"
        if prop == "age" and (said.lower() == "we" or (said == "I" and not 10 <= int(groups["v"]) <= 99)):
            continue
        if not prop:
            continue
        if prop == "{k}'s name" and (groups.get("k") or "").split()[-1] in STRANGERS | STAND_INS:
            continue  # "a guy called Dave", "one called Rex"
        if prop == "teaches":  # "he teaches at Kingsway High": a teacher, and where
            if employer := value("org", groups["v"]):
                out += [Found(entity, "works as", "teacher"), Found(entity, "works at", employer)]
            continue
        name = prop.replace("{k}", groups.get("k") or "").replace("{h}", (groups.get("h") or "").lower())
        for part in _list(groups["v"]) if prop in ("uses", "owns") else [groups["v"]]:
            if (value_said := value(kind, part, name)) is not None:
                out.append(Found(entity, name, value_said))
    return out


def _list(text: str) -> list[str]:
    """'PostgreSQL 15 and Redis', 'the billing migration and the API' -> each; anything else stays whole."""
    parts = [p.strip() for p in re.split(r",\s*(?:and\s+)?|\s+and\s+", text) if p.strip()]
    whole = len(parts) > 1 and all(re.match(r"(?:the |an? )?[A-Z]|the ", p) for p in parts)
    return parts if whole else [text]


def _possessive(clause: str, speaker: str | None) -> list[Found]:
    for shape, pattern in POSSESSIVES:
        if not (found := pattern.match(clause)):
            continue
        groups = found.groupdict()
        if shape in ("topic", "own"):
            entity = TOPIC if shape == "topic" else speaker  # "own": the speaker's
        else:
            entity = _entity(re.sub(r"'s$", "", groups["e"]), speaker)
        if not entity or PERIOD_OF_TIME.fullmatch(entity):
            return []  # "the events budget for the year is €120,000": the year owns nothing
        if shape == "relation":  # "my mum is a teacher"
            job = role(groups["r"])
            return [Found(f"{entity}'s {groups['rel']}", "works as", job)] if job else []
        prop = groups["p"].strip()
        if shape == "called":  # "my dog is called Biscuit", "Leon's cats are called Miso and Tofu"
            plural = prop.endswith("s") and not prop.endswith("ss")
            prop = f"{prop}' names" if plural else f"{prop}'s name"
        bare = re.fullmatch(r"favou?rite(?: (?:one|bit|part|thing|moment|kind|type|sort))?", prop)  # of what?
        if (not shape.startswith("favourite") and not is_property(prop)) or OLD.search(prop) or bare:
            return []
        if SECRET.search(prop):
            return []  # "my password is hunter2": never kept, never repeated
        if shape == "is" and prop in FAMILY and re.match(r"\d", groups["v"]):
            return []  # "my son is 7": his age (a rule of its own), not who he is
        kind = "names" if shape == "called" or (shape == "is" and prop in FAMILY) else "thing"
        said = value(kind, groups["v"], prop)  # "my kids are Ella and Sam"
        return [Found(entity, prop, said)] if said else []
    return []


def appositions(sentence: str, speaker: str | None) -> list[Found]:
    """'my sister Funmi', 'with my partner Sam': the speaker's relation, by name. Whatever the sentence says
    of them ("my husband Kwesi keeps saying…", "is my sister Chiara coming?"), who they are holds."""
    out = []
    for found in APPOSITION.finditer(sentence):
        owner = speaker if found["my"] else found["o"] if is_entity(found["o"]) else None
        if owner and is_entity(found["n"]) and (name := value("name", re.sub(r"'s$", "", found["n"]))):
            out.append(Found(owner, found["rel"], name))
    return out


def clause_claims(clause: str, speaker: str | None, hints: str = "") -> list[Found]:
    """Every claim one asserting clause states, in order. `hints`: the words around it (this turn and the
    one before), which decide a few readings ("joined Spotify" is a job only where work is talked of)."""
    return list(dict.fromkeys(_possessive(clause, speaker) + _rule_claims(clause, speaker, hints)))
