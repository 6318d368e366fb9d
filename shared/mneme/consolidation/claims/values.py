"""What the entity, the property and the value of a claim may be, read off conversational text.

A value is a name, a place, an amount, a date, a code or a thing, cut at its first qualifier ("Acme
since May" -> "Acme"); never a pronoun, a first- or second-person word, a time-of-speech word
("today", "here"), an opinion ("lovely") or a clause. Each rule in `rules` says which kind of value
it expects; `value(kind, text, prop)` returns the value as written, or None when the text is not one.
Leading articles stay ("the billing migration", "a blue Fiat") so a sentence built on the value reads as
English; a role drops its "a"/"an" (the sentence adds it back).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from mneme.language.text import MONTH, MONTHS

UPPER = "A-ZÀ-ÖØ-ÞĀĂĄĆČĎĐĒĘĚĞĪİŁŃŇŌŐŒŘŚŞŠŢŤŪŮŰŹŻŽ"
WORD = rf"(?:(?:Dr|Mr|Mrs|Ms|Mx|St|Prof)\.|[{UPPER}](?:[\w&'’+-]|\.(?=\w))*)"  # "Acme", "Co-op", "Miles&Go", "Dr."
NAME = rf"{WORD}(?:(?: (?:of|de|del|van|von|la|le|du|da|di|upon|&))? {WORD})*"
VERSION = r"\d+(?:\.\d+)*[a-z]?"
PRODUCT = rf"(?:{NAME}|[a-z][\w.+-]*(?= {VERSION}\b))(?: {VERSION}\b(?: {NAME})?)?"
DAY = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
DATE = (
    rf"(?:(?:{DAY}),? )?(?:(?:the )?\d{{1,2}}(?:st|nd|rd|th)? (?:of )?(?:{MONTH})(?:,? \d{{4}})?"
    rf"|the \d{{1,2}}(?:st|nd|rd|th)"
    rf"|(?:{MONTH}) \d{{1,2}}(?:st|nd|rd|th)?(?:,? \d{{4}})?|(?:{MONTH}) \d{{4}}|\d{{4}}-\d{{2}}-\d{{2}}"
    rf"|\d{{1,2}}/\d{{1,2}}/\d{{2,4}}|(?:{DAY}))"
)
NUMBER_WORD = "one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|forty|fifty|hundred"
PERIOD = r"(?:(?:a|an|per|each|every) (?:month|year|week|day|night|hour|seat|user|head|person|quarter)|/(?:mo|yr))"
AMOUNT = (
    rf"(?:[£$€¥₹]\s?\d[\d,]*(?:\.\d+)?(?:\s?(?:k|m|bn|million|billion))?"
    rf"|\d[\d,]*(?:\.\d+)?\s?(?:k|m|bn|million|billion)?\s?(?:pounds|quid|euros?|dollars|GBP|EUR|USD|CHF|SEK|NOK|DKK)"
    rf"|\d[\d,]*(?:\.\d+)?(?:k)?)(?: {PERIOD})?"
)
EMAIL = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
CODE = r"(?=[\w-]*\d)[A-Za-z0-9][A-Za-z0-9-]{2,}(?: [A-Z0-9]{2,4})?"  # LS6 2AB, C-20931, kestrel42, KL99812

# A value's tail that is not the value: "Berlin last year", "Premium since the upgrade", "Tesco on weekends".
QUALIFIER = re.compile(
    r",(?!\d)|[;:()!?\"]|\.(?:\s|$)|\s[-–—]\s|\s(?:since|as of|until|till|because|cos|according to|now|currently|again|"
    r"usually|for (?:work|tickets|years|now|ages|a while|the|a|an|\d+|two|three|four|five|six|ten|some|many|my|our|"
    r"his|her|their)|and (?:he|she|they|it|i|we|you|so|then|that|this|its|it's|i'm|loving|still|now)|anyway|"
    r"by the way|btw|tbh|fyi|lol|haha|these days|going forward|from now on|for the time being|nowadays|hands down|"
    r"honestly|originally|actually|last|this|next|"
    r"every|each|in (?:the )?(?:spring|summer|autumn|fall|winter|" + MONTH + r"|\d{4}|the end|prod|production)|"
    r"on (?:the )?(?:weekends?|weekdays|mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|"
    r"the side|and off)|only|too|as well|instead\b.*|though|fluently|right now|at the moment|lately|"
    r"recently|already|full[- ]time|part[- ]time|mostly|mainly|ever since|which|who|where|so|cause|after|before|"
    r"when|while|if|but|with (?:my|our|his|her|their|the|a)|at (?:the moment|home|night|weekends)|"
    r"most days|every day|daily|weekly|yet|anymore|any more|then)\b",
    re.I,
)
PREFERENCE_END = re.compile(
    r"[,;:!?]|\.(?:\s|$)|\s(?:and|but|over|than|when|whenever|for|before|after|to|rather than|instead of|because|so|"
    r"if|every|unless|while)\s",
    re.I,
)
TRAILING = re.compile(r"(?:\s+(?:now|then|too|lol|haha|btw|tbh|though|obviously|really|ok|x+))+$", re.I)

PERSONAL = frozenset(
    "i me my mine myself we us our ours you your yours he him his she her hers it its they them their theirs "
    "this that these those someone somebody something anyone anything everyone everything nobody nothing "
    "i'm i've i'd i'll we're we've you're it's that's there's here's".split()
)
TIME_OF_SPEECH = frozenset(
    "now today tonight tomorrow yesterday soon later earlier then here there ago currently recently lately "
    "weekend".split()
)
QUANTIFIERS = frozenset("lot lots bit some any much many more less most all both few several loads tons".split())
VERBISH = frozenset(
    "is are was were be been being am have has had do does did will would can could should may might must "
    "make made get got go going gone take took let say said see know think want need like love hate keep put "
    "sure feel seems looks sounds came come".split()
)
# Lowercase one-word values that are judgements or states, never values: "my manager is lovely".
EVALUATIVE = frozenset(
    "nightmare mess pain joke disaster dream legend star saint angel genius idiot hero nightmare bit lot "
    "fine ok okay good great bad awful lovely nice amazing terrible brilliant perfect dead broken busy tired "
    "sorted done gone over here there back away off out opposite same best worst reason problem issue point "
    "deal thing type worry delay mess mistake error outage accident damage incident confusion chaos fault "
    "bill".split()
)
# A kin word said as a name ("Nan lives in Hull", "Uncle Emeka"): whose nan? The title is no part of the name.
KIN_TITLES = frozenset(
    "Nan Nana Nanna Gran Granny Grandma Grandad Granddad Grandpa Grandmother Grandfather Mam Mammy Mummy Mommy "
    "Daddy Papa Mama Auntie Aunty Aunt Uncle Cousin".split()
)
NOT_NAMES = (
    frozenset(
        "I I'm I've I'd I'll We You He She They It My Our Your His Her Their Its The A An This That These Those There "
        "Here What Who Where When Why How Which Let Let's Yes Yeah Yep Yup No Nope Not So And But Or Also Just Oh Ok "
        "Okay OK Hi Hey Hello Lol LOL Haha Thanks Thank Please Sorry Well Today Tomorrow Yesterday Tonight Everyone "
        "Everybody Anyone Someone Nobody Nothing Something Everything Same Sure Nice Great Cool Good Bad Wow Omg OMG "
        "Btw BTW Fyi FYI Morning Evening Night Congrats Happy Mum Mom Dad Also Maybe Perhaps Then Now Still Definitely "
        "Honestly Actually Anyway Ugh Ooh Aww Love Damn God Jesus Christmas Easter Me Him Her Us Them Mine Yours "
        "Home Nowhere Everywhere Somewhere Anywhere Elsewhere Abroad Around Retired Unemployed Freelance Remote "
        "Remotely Online Uni School Work Office Downtown Various Several Different Tough Hard Long Fine Not Life "
        "Coffee Lunch Dinner Breakfast Weekend Weekends".split()
    )
    | KIN_TITLES
)
ADJECTIVAL = re.compile(r"\w-(?:based|ish|like|style|friendly|free|heavy|first|only|native|ready|powered)\b")
DAYS_MONTHS = frozenset((DAY + "|" + MONTH).split("|"))
ROLE_HEADS = frozenset(
    """
    accountant actor actress administrator adviser advisor agent analyst anaesthetist anesthetist architect
    artist assistant associate attorney auditor author baker banker barber barista barrister biologist
    bookkeeper builder butcher buyer carer caregiver carpenter cashier ceo cfo chef chemist cleaner clerk
    coach columnist consultant cook coordinator copywriter counsellor counselor cto curator dentist designer
    dev developer dietitian director doctor driver economist editor electrician engineer entrepreneur
    estimator executive farmer firefighter freelancer gardener geologist graphic hairdresser head historian
    illustrator inspector instructor intern investigator journalist judge labourer lawyer lead lecturer
    librarian lifeguard mechanic midwife manager marketer mathematician musician nanny nurse nutritionist
    officer optician optometrist paralegal paramedic partner pharmacist photographer physician physicist
    physio physiotherapist pilot plumber po pm policeman policewoman porter postman president principal
    producer professor programmer psychiatrist psychologist publicist receptionist recruiter reporter
    researcher scientist secretary sre solicitor specialist statistician steward stewardess strategist
    supervisor surgeon surveyor teacher technician tester therapist translator treasurer tutor typesetter
    underwriter vet veterinarian waiter waitress welder writer trainer instructor planner handler operator worker
    representative rep controller dispatcher courier soldier sailor ranger guard warden caretaker janitor
    housekeeper concierge teller broker trader archivist conservator sommelier bartender barman barmaid server
    pastor vicar priest rabbi imam chaplain apprentice trainee childminder councillor diplomat technologist
    hygienist radiographer sonographer registrar doula podiatrist chiropractor osteopath dermatologist
    cardiologist paediatrician pediatrician orthodontist audiologist gp sre swe qa ux ui
    """.split()
)
# "a good nurse", "a retired teacher", "an amateur photographer": a judgement, a past or a hobby, not a job.
NOT_ROLE_MODIFIERS = frozenset(
    """
    good great bad terrible amazing brilliant lovely nice proper real total decent fantastic awful wonderful
    excellent kind strict busy tired better best worse worst natural born big little huge massive failed
    wannabe aspiring frustrated typical fellow former retired ex future would-be amateur hobby trainee-to-be
    useless terrible lazy rubbish crap shit hopeless glorified keen avid hard designated casual occasional secret
    closet budding serial compulsive accidental reluctant unpaid self-appointed self-taught weekend home free
    """.split()
)
# Said of oneself, "I'm an artist" is who one is as often as one's job: only "I work as an artist" says the job.
IDENTITIES = frozenset(
    "artist writer musician photographer painter poet dancer singer actor actress author carer caregiver "
    "entrepreneur freelancer".split()
)
WORKPLACES = frozenset(
    """
    hospital school university uni college bank library council museum charity startup start-up agency
    supermarket bakery cafe café restaurant pharmacy clinic hotel factory warehouse airport nursery garage
    primary secondary practice surgery firm consultancy newspaper studio lab laboratory
    """.split()
)
FAMILY = (
    "mum mom mother dad father sister brother wife husband partner son daughter boyfriend girlfriend fiancé fiance "
    "fiancée fiancee friend cousin aunt uncle niece nephew grandma grandmother grandpa grandfather flatmate "
    "roommate housemate neighbour neighbor stepmum stepdad stepson stepdaughter kid kids children parents "
    "grandparents family twins"
).split()
# Properties whose value may be a lowercase word or phrase ("favourite season | autumn", "seat preference |
# aisle", "job title | staff engineer").
CATEGORY = re.compile(
    r"\b(?:favou?rite|preference|preferred|type|title|language|rotation|colou?r|size|style|genre|tier|level|"
    r"role|job|position|diet|sign|star sign|blood|plan|subscription|schedule|pattern|length|rating|frequency|"
    r"religion|pronouns|nationality|hobby|sport|team|shift|specialism|speciality|specialty|major|degree|"
    r"subject|breed|seat|scheme|rate|method|model|basis|status|format|mode|policy|terms?)\b",
    re.I,
)
SCHOOLS = frozenset(
    "School Primary Academy College High Uni University Grammar Nursery Infants Juniors Institute".split()
)
FREQUENCY = frozenset("daily weekly fortnightly monthly quarterly yearly annually biweekly hourly".split())
DIETS = (
    "vegetarian",
    "vegan",
    "pescatarian",
    "pescetarian",
    "teetotal",
    "gluten-free",
    "dairy-free",
    "halal",
    "kosher",
)
INTOLERANCES = (
    "coeliac",
    "celiac",
    "lactose intolerant",
    "lactose-intolerant",
    "gluten intolerant",
    "gluten-intolerant",
)
CONDITIONS = (
    "asthma", "diabetes", "type 1 diabetes", "type 2 diabetes", "adhd", "autism", "epilepsy", "coeliac disease",
    "celiac disease", "arthritis", "eczema", "psoriasis", "migraines", "ibs", "dyslexia", "tinnitus", "lupus",
    "crohn's", "crohn's disease", "endometriosis", "a pacemaker", "hypertension", "high blood pressure",
)  # fmt: skip


KNOWN_TOOLS = frozenset(
    """
    jira linear slack teams notion confluence trello asana monday clickup basecamp github gitlab bitbucket jenkins
    circleci travis aws azure gcp heroku vercel netlify postgres postgresql mysql mariadb mongodb redis sqlite
    oracle kubernetes docker terraform ansible vim neovim emacs vscode intellij pycharm xero sage quickbooks
    freeagent salesforce hubspot pipedrive zendesk intercom zoom meet webex figma sketch miro outlook gmail
    thunderbird discord whatsapp signal telegram chrome firefox safari edge android ios windows macos linux
    ubuntu python java ruby rails django flask react vue angular svelte php node kotlin swift rust go
    excel sheets tableau looker powerbi airtable dropbox onedrive wordpress shopify squarespace wix stripe
    paypal datadog grafana prometheus sentry pagerduty opsgenie bamboo argo spinnaker mercurial svn subversion
    """.split()
)
TOOL_HINTS = re.compile(
    r"\b(?:tickets?|docs|ci|deploys?|builds?|pipelines?|repo|backlog|sprints?|database|db|stack|tool(?:ing|s)?|"
    r"app|platform|software|framework|language|migration|instance|server|cluster|workspace|tracker|editor|"
    r"ide|licen[cs]es?|integration)\b",
    re.I,
)
HOME_HINTS = re.compile(
    r"\b(?:flat|house|home|rent|landlord|neighbours?|commute|moving|boxes|city|country|village|town|area|"
    r"family|kids|parents)\b",
    re.I,
)
LIVING_HINTS = re.compile(r"\b(?:live|lives|living|lived|moved|moving|based|relocated|no longer)\b", re.I)
WORK_HINTS = re.compile(
    r"\b(?:job|work|working|team|role|company|employer|hired|offer|colleagues?|boss|manager|office|salary|"
    r"interview|career|position|contract|promot\w+|resign\w*|redundan\w+|engineer|designer|developer|analyst|"
    r"startup|as an?)\b",
    re.I,
)


def known_tool(name: str) -> bool:
    return name.lower().split()[0] in KNOWN_TOOLS if name.split() else False


WORKPLACE = "|".join(WORKPLACES)
DEPARTMENTS = frozenset(
    "marketing sales finance engineering product design legal operations ops hr it support accounts research "
    "security data platform infrastructure comms communications management admin procurement payroll".split()
)

# What holds for the moment it is said, not as a lasting fact: "my train is the 8:15", "my order is a latte".
TRANSIENT = frozenset(
    """
    train flight bus appointment meeting interview exam test order table booking reservation gate platform lunch
    dinner breakfast coffee round turn day week weekend morning evening night holiday trip plans ride taxi
    uber delivery parcel package room eta answer guess bet excuse problem point question issue mood head back
    knee stomach throat battery signal wifi connection internet car's battery seat ticket score result results
    dream goal hope wish idea fear worry favourite news story vote pick prediction tip advice suggestion
    recommendation theory verdict opinion view take
    """.split()
)


QUANTITY = re.compile(rf"\d|\b(?:exactly|only|just|about|around|{NUMBER_WORD}|several|many|few)\b", re.I)

NAME_RE, PRODUCT_RE, NAMED = re.compile(NAME), re.compile(PRODUCT), re.compile(rf"(?:the |The )?{PRODUCT}")
DATE_RE, AMOUNT_RE = re.compile(DATE, re.I), re.compile(AMOUNT)
LITERAL = re.compile(  # an amount, a date, an email, a code, a count, a blood type, a number
    rf"(?:{AMOUNT}|{DATE}|{EMAIL}|{CODE}|(?:{NUMBER_WORD}) \w+|O (?:negative|positive)|[ABO]{{1,2}}[+-]|\d[\w .,/-]*)",
    re.I,
)
TITLE_WORD = re.compile(rf"[{UPPER}][a-zà-ÿ]+")
HEADS = {  # a value of these kinds is the name at the start of the text: "Stripe on the payments team" -> Stripe
    "place": re.compile(rf"{NAME}"),
    "org": re.compile(rf"(?:the |The )?{NAME}(?: (?:{WORKPLACE})\b)?|(?:the|a|an) (?:[a-z]+ )?(?:{WORKPLACE})\b"),
    "name": re.compile(rf"(?:the |The )?{NAME}"),
    "product": re.compile(rf"(?:the |The |an? )?{PRODUCT}"),
    "tool": re.compile(rf"(?:the |The |an? )?{PRODUCT}"),
    "names": re.compile(rf"{NAME}(?:(?:, | and | & ){NAME})*"),
}


INTRODUCED_AS = re.compile(
    r"^(?:an?|this|some) (?:guy|man|woman|bloke|lad|girl|lady|chap|person|fella|dude) (?:called|named) (?=[A-Z])"
)


def clean(value: str) -> str:
    """The value up to its first qualifier, without trailing punctuation or filler words."""
    value = re.sub(r"^(?:now|currently|still)\s+", "", value.strip(), flags=re.I)
    value = INTRODUCED_AS.sub("", value)  # "a guy called Tomasz" is Tomasz
    value = QUALIFIER.split(value, maxsplit=1)[0]
    value = TRAILING.sub("", value.strip(" .'\"’“”")).strip(" .'\"’“”")
    return value


def words_of(text: str) -> list[str]:
    return re.findall(r"[\w'’&.+-]+", text.lower())


def personal_or_vague(text: str) -> bool:
    """A pronoun, a first/second-person word, a time-of-speech word, a quantifier or a verb anywhere (the
    month May is none of them)."""
    found = [w.strip(".") for w in words_of(re.sub(r"\bMay\b", "", text))]
    return any(w in PERSONAL or w in TIME_OF_SPEECH or w in QUANTIFIERS or w in VERBISH for w in found)


def is_name(text: str, *, allow_days: bool = False) -> bool:
    """A proper name: capitalised words (a version number may follow), not a pronoun, greeting or filler."""
    if not NAMED.fullmatch(text) or len(text.split()) > 6 or ADJECTIVAL.search(text):
        return False
    first = re.sub(r"^(?:the|The) ", "", text).split()[0]
    if first in NOT_NAMES or first.rstrip("'s’") in NOT_NAMES:
        return False
    return allow_days or first.lower() not in DAYS_MONTHS


def _article_phrase(text: str, prop: str) -> bool:
    """'a blue Fiat', 'the Pro plan': an article and a short noun phrase, no judgement, and not a stand-in
    for something said before ('the old one', 'the other thing')."""
    found = re.fullmatch(r"(?:a|an|the) ([\w'’&.+-]+(?: [\w'’&.+-]+){0,4})", text, re.I)
    if not found or re.search(r"\b(?:at|in|on|from|with|for|to|by|near|about|who|that|which|than|as|and)\b", found[1]):
        return False
    last = found[1].split()[-1].lower()
    if last in EVALUATIVE or last in STAND_INS:
        return False
    return not (last.endswith("ing") and not CATEGORY.search(prop))


def _named_phrase(text: str, prop: str) -> bool:
    """An article phrase that names what it is ('a blue Fiat', 'the Pro plan', 'a 2019 Golf'), or one of a
    category ('seat preference | the aisle'): 'my car is a wreck', 'my flat is a tip', 'my spirit animal is
    a sloth' say what one thinks of a thing, not which thing it is."""
    named = any(TITLE_WORD.fullmatch(w) or re.search(r"\d", w) or w.isupper() for w in text.split()[1:])
    return _article_phrase(text, prop) and (named or bool(CATEGORY.search(prop)))


def _bare_phrase(text: str, prop: str) -> bool:
    """A lowercase phrase as a value: only where the property names a category ("favourite food | ramen")."""
    if text.lower() in FREQUENCY:
        return True
    words = text.lower().split()
    if not words or words[0] in ("a", "an", "the") or any(w in EVALUATIVE for w in words):
        return False  # "our team is the best": a judgement
    return bool(CATEGORY.search(prop)) and len(words) <= 4


PRODUCT_NOUN = re.compile(
    r"\b(?:app|apps|plan|tier|subscription|membership|licen[cs]e|package|service|tariff|version|edition|model|"
    r"platform|software|tool|framework|library|database|editor|browser|client|provider|account|card)$",
    re.I,
)
STAND_INS = frozenset("one ones thing things stuff way kind type sort bit lot version option bits".split())
# A time of day or week, a shift: when one does something, not a thing one uses ("switched to nights").
TIMES = re.compile(
    r"(?:mornings?|afternoons?|evenings?|nights?|days?|weeks?|weekends?|weekdays?|lates|earlies|shifts?|"
    rf"(?:{DAY})s)$",
    re.I,
)


def is_tool(text: str) -> bool:
    """What one uses: a name ('Linear', 'Postgres 16'), a named article phrase ('a MacBook Air'), or a short
    lowercase phrase ('oat milk', 'decaf') that is no activity ('working from home') or time ('nights')."""
    if is_name(text):
        return not TIMES.fullmatch(text)
    if _article_phrase(text, "") and (_named_phrase(text, "") or PRODUCT_NOUN.search(text)):
        return True  # "a MacBook Air", "the annual plan", not "the stairs"
    first = text.split()[0].lower() if text.split() else ""
    return is_phrase(text, 3) and not first.endswith("ing") and not TIMES.search(text) and not QUANTITY.search(text)


def is_thing(text: str, prop: str = "", *, bare: bool = True) -> bool:
    """A value of a possessive property: a name, an amount, a date, a code or address, a thing. A bare
    weekday is a day relative to when it was said ("my birthday is Tuesday"), unless the property is a
    weekly one ("day off")."""
    if not text or personal_or_vague(text) or len(text.split()) > 7:
        return False
    if text.lower() in DAYS_MONTHS and text.lower() not in MONTHS and not re.search(r"\bday\b", prop):
        return False
    if re.match(r"(?:in|on|at|from|with|for|to|by|near|over|under|into|about|like|just|so|very|really|quite|"
                r"too|also|always|never|not|no|still|more|less|kind|sort|such)\b", text, re.I):  # fmt: skip
        return False
    if LITERAL.fullmatch(text):
        return True
    return is_name(text, allow_days=True) or _named_phrase(text, prop) or (bare and _bare_phrase(text, prop))


def is_role(text: str) -> bool:
    """A job: up to four words ending in a known role ('data engineer', 'UX researcher', 'SRE')."""
    parts = text.split()
    if not parts or len(parts) > 4 or personal_or_vague(text):
        return False
    head = parts[-1].lower().rstrip("s") if parts[-1].lower() not in ROLE_HEADS else parts[-1].lower()
    if head not in ROLE_HEADS:
        return False
    return all(re.fullmatch(r"[a-z][\w'’-]*|[A-Z]{2,5}|[A-Z][a-z]+(?:'s)?", p) for p in parts)


def role(text: str) -> str | None:
    """The role as a value: no article, its first word lowercased unless a name or acronym."""
    text = re.sub(r"^(?:an?|the) (?:(?:new|current) )?", "", text, flags=re.I)
    if not is_role(text) or any(w in NOT_ROLE_MODIFIERS for w in text.lower().split()):
        return None
    first, _, rest = text.partition(" ")
    if re.fullmatch(r"[A-Z][a-z]+", first) and first.lower() in ROLE_HEADS | {"product", "senior", "junior"}:
        first = first.lower()
    elif re.fullmatch(r"[A-Z][a-z]+", first) and rest and rest[0].islower():
        first = first.lower()  # "Product designer" at the start of an answer
    return f"{first} {rest}".strip()


def is_workplace(text: str) -> bool:
    """An employer: a name ('Southmead hospital' too), or 'the hospital' / 'a school'."""
    if is_name(text) or (is_name(text.rsplit(" ", 1)[0]) and text.rsplit(" ", 1)[-1] in WORKPLACES):
        return True
    found = re.fullmatch(r"(?:the|a|an) (?:[a-z]+ )?([a-z]+)", text)
    return found is not None and found[1] in WORKPLACES


ORGANISATION = re.compile(
    r"\b(?:Ltd|Limited|Inc|plc|PLC|LLC|LLP|GmbH|Gas|Energy|Bank|Group|Insurance|Telecom|Media|Services|Solutions|"
    r"Systems|Technologies|Labs|Software|Consulting|Partners|Holdings)\.?$"
)


# What one "lives in" that is no place: "I live in Crocs", "she lives in joggers".
CLOTHES = frozenset(
    "crocs uggs joggers trackies pyjamas pjs hoodies hoodie leggings trainers sweatpants jeans slippers "
    "onesies onesie sliders flip-flops birkenstocks".split()
)


def is_place(text: str) -> bool:
    """A place: a name, not a department ('I moved to Marketing') or a company ('I'm from British Gas')."""
    if text.lower() in DEPARTMENTS or text.lower() in CLOTHES or ORGANISATION.search(text) or known_tool(text):
        return False
    return bool(NAME_RE.fullmatch(text)) and is_name(text) and len(text.split()) <= 5


def is_phrase(text: str, max_words: int = 4) -> bool:
    """A short lowercase or capitalised phrase without pronouns, verbs or vague words (studies, allergens):
    'chemistry', 'shellfish', not 'the menu' (a thing in front of one) or 'every night'."""
    return (
        bool(text)
        and not re.match(r"(?:the|a|an|this|that|some|my|your|our)\b", text, re.I)
        and len(text.split()) <= max_words
        and not personal_or_vague(text)
        and not re.search(
            r"^(?:in|on|at|from|with|for|to|by|so|very|really)\b|\b(?:every|each|all|night|nights|morning|evening|"
            r"hard|late|online|alone|together|loads|lots)\b",
            text,
            re.I,
        )
    )


# What no one is allergic to but in jest: "allergic to Mondays", "allergic to effort", "allergic to running".
NOT_ALLERGENS = frozenset(
    "effort work people mornings exercise commitment responsibility adulting homework housework chores fun life "
    "school maths math cardio gyms gym meetings emails email small talk children kids men women vegetables "
    "sunlight daylight early starts".split()
)


def is_allergen(text: str) -> bool:
    """What one may be allergic to: a short phrase ('peanuts', 'cats', 'penicillin'), no time ('Mondays'), no
    activity ('running') and none of the things people claim in jest."""
    first = text.split()[0].lower() if text.split() else ""
    return (
        is_phrase(text) and not TIMES.search(text) and not first.endswith("ing") and text.lower() not in NOT_ALLERGENS
    )


# A secret is never a property: kept, it would be repeated to whoever recalls it.
SECRET = re.compile(
    r"\b(?:password|passcode|passphrase|passwd|pin|pin code|pin number|cvv|cvc|security (?:code|answer|question)|"
    r"memorable (?:word|answer|date)|one-time code|otp|verification code|login code|api key|access key|token|"
    r"secret|credentials)\b",
    re.I,
)


def is_property(text: str) -> bool:
    """A property is a short noun phrase: no verbs, pronouns, time words or names ('make sure the trail',
    'brother Pádraig' are none); an acronym may be one ('CI', 'VAT scheme'); never a secret ('password')."""
    if SECRET.search(text):
        return False
    parts = text.split()
    if any(TITLE_WORD.fullmatch(p) for p in parts):
        return False
    parts = text.lower().split()
    head = parts[:-1] if len(parts) > 1 and parts[-1] in ("home", "back", "out", "over", "there", "away") else parts
    if not head or head[-1] in TRANSIENT:  # "my flight home": a flight
        return False
    return len(parts) <= 4 and not any(p in VERBISH or p in PERSONAL or p in TIME_OF_SPEECH for p in parts)


def is_entity(text: str) -> bool:
    """A named entity: a name that is not a pronoun, greeting, day or month ('Saturday works for me')."""
    return is_name(text) and not any(w in PERSONAL for w in words_of(text))


def _head(kind: str, text: str) -> str:
    found = HEADS[kind].match(text) if kind in HEADS else None
    if found and re.fullmatch(r"(?: (?:[a-z]|\d+ (?:years?|months?|weeks?|days?) ago\b).*)?", text[found.end() :]):
        return found[0]
    return text


def value(kind: str, text: str, prop: str = "") -> str | None:
    """`text` (the rest of a clause after a rule's verb) as a value of `kind`, or None."""
    if kind == "role":  # "a midwife at St Mary's": the role is what comes before its employer
        return role(clean(re.split(r"\s(?:at|for|with|in|on)\s", text, maxsplit=1)[0]))
    if kind == "preference":  # "phone calls before 10am", "written summaries over meetings and …"
        text = PREFERENCE_END.split(text, maxsplit=1)[0].strip(" .!")
        ok = is_phrase(text, 6) or _article_phrase(text, "prefers")
        return text if ok and not personal_or_vague(text) else None
    if kind == "exact-role":  # "I'm the children's librarian now", not "Kenji is the on-call lead for May"
        text = re.sub(r"\s+(?:now|these days|nowadays|at the moment)$", "", text.strip(" .!"))
        found = role(text) if clean(text) == text else None
        return found if found and found.split()[-1].lower() not in IDENTITIES else None
    found = _head(kind, clean(text))
    if found.lower().startswith("on ") and DATE_RE.fullmatch(found[3:]):
        found = found[3:]  # "my birthday is on the 3rd of March"
    if not found or found.lower().split()[0] in PERSONAL:
        return None
    checks: dict[str, Callable[[str], bool]] = {
        "place": is_place,
        "org": is_workplace,
        "name": lambda v: is_name(v) and not personal_or_vague(v),
        "product": lambda v: (is_name(v) or bool(PRODUCT_RE.fullmatch(v))) and not personal_or_vague(v),
        "tool": is_tool,
        "thing": lambda v: is_thing(v, prop),
        "answer": lambda v: is_thing(v, prop, bare=False),  # an answer's "Tough one." is no favourite film
        "owned": lambda v: is_name(v) or _article_phrase(v, "owns") or (is_phrase(v, 3) and not QUANTITY.search(v)),
        "phrase": is_phrase,
        "allergen": is_allergen,
        "age": lambda v: bool(re.fullmatch(r"\d{1,3}", v)) and 0 < int(v) < 120,
        "names": lambda v: all(is_name(n) for n in re.split(r", | and | & ", v)),
        "amount": lambda v: bool(AMOUNT_RE.fullmatch(v)) and bool(re.search(r"[£$€¥₹k]|pounds|euros|dollars", v)),
        "date": lambda v: bool(DATE_RE.fullmatch(v)) and v.lower() not in DAYS_MONTHS,  # "born on Saturday"
        "school": lambda v: is_name(v) and v.split()[-1] in SCHOOLS,
    }
    return found if checks[kind](found) and not personal_or_vague(found) else None
