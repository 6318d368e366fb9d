"""Build bench/quality/dataset.jsonl: a labelled recall test set, deterministic (fixed seed).

Corpus: ~2,600 filler episodes from the synthetic generator in bench/_common.py (people,
customers, products, orders, tickets over 2025-01..2026-06) plus the hand-written seed facts
below, each with distractors about other entities. Queries, by category:

- paraphrase: the query words differ from the answer's; each answer has a lexical trap (an
  episode that shares the query's words but does not answer it).
- identifier: order numbers, part codes (KX19-44B style), ticket ids and people's names
  (some with diacritics), with near-miss distractors (neighbouring numbers, one character off,
  same first name, same attribute of another person).
- date: "what happened on 4 March 2026" (relevant = every episode of that day, computed from
  the corpus) and "the board meeting in March 2026" (same topic in other months and years).
- multi-session: the answer is spread over two episodes in two sessions weeks apart; both are
  relevant (recall@k counts each), the same story about other entities are the distractors.

Lines are JSON: one `meta`, then `episode` {id, scope, session_id, occurred_at, content}, then
`query` {id, category, kind, query, relevant}. The same code gives the same file, byte for byte.

    .venv/bin/python bench/quality/build.py
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _common as c

SEED = 20260314
FILLER = 2600
OUT = Path(__file__).resolve().parent / "dataset.jsonl"

# (answer, query, lexical trap)
PARAPHRASES = [
    ("Tomasz Brennan breaks out in hives whenever he eats prawns or crab, so no shellfish in his catering.",
     "who has a seafood allergy?",
     "Tomasz Brennan booked the seafood restaurant by the harbour for the team dinner on Friday."),
    ("Hana Okafor cannot get into the building before nine because the front desk only opens then.",
     "why can't someone access the office early in the morning?",
     "Hana Okafor asked for an early morning slot in the office kitchen rota."),
    ("The router in the Ghent warehouse drops every device each afternoon when the forklifts start charging.",
     "intermittent wifi outages at the depot",
     "Ordered twenty network cables and a wifi extender for the Bilbao depot."),
    ("Harbour Dental will only sign the renewal if the price comes down by ten percent.",
     "which client wants a discount before extending their contract?",
     "Greystone Legal extended their contract early and asked for no changes to the terms."),
    ("Dmitri Petrov is moving to Canada in the autumn and will hand his accounts over before he goes.",
     "which colleague is relocating abroad later this year?",
     "Dmitri Petrov asked which colleague could cover his accounts later this year during the audit."),
    ("The Vega espresso machine on the third floor leaks water onto the counter every morning.",
     "coffee maker dripping in the kitchen",
     "Someone left the kitchen fridge open overnight and the milk for the coffee went sour."),
    ("Keiko Tanaka finds long video calls exhausting and would rather get a written summary afterwards.",
     "who dislikes lengthy online meetings?",
     "Keiko Tanaka scheduled lengthy online training meetings for the new support staff."),
    ("The quarterly numbers have to reach the auditors by the last Friday of the month, no exceptions.",
     "deadline for sending financial results to the accountants",
     "The accountants sent their invoice for the financial results review two weeks late."),
    ("Our biggest customer in Lyon went bankrupt, so their unpaid invoices will probably never be settled.",
     "client that became insolvent with outstanding debts",
     "A client in Lyon asked whether outstanding debts can be paid in instalments."),
    ("Bram Whitfield shouted at the support agent during the call and then hung up on her.",
     "which person was rude to our helpdesk staff?",
     "Bram Whitfield praised our helpdesk staff for solving his login problem quickly."),
    ("The parking garage under the Leeds office will be closed for resurfacing throughout August.",
     "where can't staff leave their cars next month?",
     "Staff can leave their bikes in the Leeds office basement next month."),
    ("Priya Iqbal just became a mother and will be off work until the spring.",
     "who is on parental leave?",
     "Priya Iqbal approved the new parental leave policy draft for the handbook."),
    ("The new intern keeps forgetting to lock the laptop when stepping away from the desk.",
     "security lapse by a junior employee leaving the computer unattended",
     "A junior employee asked for a second computer monitor at their desk."),
    ("Cobalt Studios pays every bill at least sixty days late, even after reminders.",
     "which customer is a chronic slow payer?",
     "Cobalt Studios asked which payment methods we accept for customer deposits."),
    ("The warehouse in Rotterdam ran out of space, so pallets are being stacked in the loading bay.",
     "storage capacity problem at the distribution centre",
     "The distribution centre in Hamburg installed new shelving for extra capacity."),
    ("Elif Varga devours sci-fi novels and always asks the team for book tips.",
     "who enjoys reading science fiction?",
     "Elif Varga recommended a podcast about the history of science for the reading club."),
    ("The heating in the Dublin office fails whenever the temperature outside drops below zero.",
     "radiators stop working in cold weather",
     "Bought two portable radiators for the Porto meeting room."),
    ("Jonas Rossi wants every proposal printed and posted to him because he does not read email.",
     "who refuses electronic correspondence and prefers paper?",
     "Jonas Rossi asked for paper cups instead of plastic ones in the canteen."),
    ("The SOC 2 auditor found that former employees still had active accounts weeks after leaving.",
     "offboarding gap discovered during the compliance review",
     "The compliance review meeting was moved to Thursday because the reviewer was ill."),
    ("The Zephyr air purifier makes a rattling noise at its highest fan setting.",
     "loud vibration from the air cleaner",
     "A customer asked whether the air cleaner filter can be washed."),
    ("Nadia Castillo got engaged last weekend and is planning a wedding in Portugal next summer.",
     "which colleague is getting married?",
     "A colleague asked whether getting married changes the pension paperwork."),
    ("The mobile app crashes on older Android phones as soon as the camera opens.",
     "application freezes when taking a photo on legacy smartphones",
     "Marketing wants a photo of every legacy product for the website."),
    ("Farah Haddad speaks fluent Japanese and can help with the Osaka distributor.",
     "who can translate for our partner in Japan?",
     "Our partner in Japan asked for a translated price list by Friday."),
    ("Our landlord is raising the rent on the Bristol unit by eighteen percent from January.",
     "office lease cost increase",
     "The Bristol office lease includes two parking spaces and a storage room."),
    ("The courier left three parcels in the rain outside Northwind Bakery and the boxes were ruined.",
     "delivery damaged by bad weather",
     "Northwind Bakery asked for delivery before the weekend because of bad weather warnings."),
    ("Gustavo Silva will not get on a plane, so meetings abroad need a train route or a video link.",
     "who is afraid of flying?",
     "Gustavo Silva asked who is flying to Hamburg for the trade fair."),
    ("The finance team still builds the monthly report by copying numbers between twelve spreadsheets.",
     "manual error-prone process for management accounts",
     "Management asked for the accounts process to be documented for new hires."),
    ("The Summit office chair's armrest snapped off after two weeks of use.",
     "broken seat part after a short time",
     "A customer asked how long the seat warranty lasts before buying."),
    ("Rosa Lindqvist is colour-blind, so charts need patterns or labels and not only red and green.",
     "accessibility need for a teammate when reading graphs",
     "Rosa Lindqvist redesigned the graphs in the board pack using the new brand colours."),
    ("The bakery's freezer broke overnight and a week of stock had to be thrown away.",
     "spoiled inventory after a refrigeration failure",
     "Kestrel Farms asked for a refrigeration unit quote for their inventory room."),
    ("Yusuf Zhang is leaving the company at the end of the month for a job at a competitor.",
     "who resigned to join a rival?",
     "Yusuf Zhang asked for a rival vendor's price list to compare against ours."),
    ("The website goes down every night at two while the backup job locks the database.",
     "nightly outage of the online shop caused by maintenance",
     "The online shop will show a maintenance banner during the Sunday release."),
    ("Chiara Moreau only drinks oat milk, so order some for the workshop coffee.",
     "dietary preference for a plant-based dairy alternative",
     "The workshop catering order includes dairy and plant-based sandwiches."),
    ("Quayside Brewing wants to pause their subscription over the winter because the taproom is shut.",
     "seasonal suspension of a customer's plan",
     "Quayside Brewing upgraded their plan to include the seasonal beer labels."),
    ("Umar Usman's laptop was stolen from his car at a motorway service station.",
     "theft of a company computer",
     "The company bought ten new computers for the sales team."),
    ("The SaaS vendor doubled its per-seat price without notice, so we are looking at alternatives.",
     "supplier suddenly made their software much more expensive",
     "The software supplier sent the new contract for signature."),
    ("Wesley Kowalski needs a standing desk because of a back injury from cycling.",
     "ergonomic equipment request due to a medical condition",
     "Wesley Kowalski requested ergonomic equipment quotes for the new office."),
    ("Half the support team caught the flu in the same week, so replies to tickets took twice as long.",
     "staff illness slowing down customer service",
     "Customer service staff asked for faster laptops."),
    ("The board decided to stop selling in the United States after the tariff change.",
     "leadership withdrew from the American market",
     "The American distributor asked about the leadership team changes."),
    ("Mei Nakamura was promoted to head of operations and now approves all purchase orders.",
     "who signs off spending now?",
     "Mei Nakamura asked who signs off the spending for the team party."),
    ("Aoife Jansen's flight from Krakow was cancelled, so she will join the workshop remotely.",
     "colleague attending virtually because of travel disruption",
     "The workshop has a virtual attendance option for colleagues abroad."),
    ("Atlas Freight's drivers are on strike, so shipments to Turin are delayed until further notice.",
     "industrial action holding up deliveries to Italy",
     "Deliveries to Italy now include customs paperwork printed in Italian."),
    ("The printer on floor two jams every time someone uses the thick card stock.",
     "paper feed problem with heavy media",
     "Ordered heavy paper for the trade fair brochures."),
    ("Sanjay Adeyemi has twins starting school in September and can only work mornings.",
     "who needs part-time hours for childcare?",
     "Sanjay Adeyemi asked for the childcare voucher scheme details for a friend."),
    ("Larkspur Hotels' booking system sends every confirmation email twice to each guest.",
     "duplicate notifications going out to customers",
     "Customers asked to receive notifications by text message instead."),
    ("Vera Fischer ran her first marathon in Valencia in just under four hours.",
     "which teammate completed a long-distance race?",
     "Vera Fischer organised the team race night at the Valencia office."),
    ("The water filter at the Leipzig site tastes of chlorine since the cartridge was changed.",
     "drinking water has a chemical flavour after maintenance",
     "Maintenance replaced the cartridge in the Leipzig coffee machine."),
    ("Oscar Dubois forgot his badge again and had to be signed in by reception.",
     "someone repeatedly arrives without their access card",
     "Reception ordered new access cards for the summer interns."),
    ("Juniper Health will only store patient data in Germany because of their regulator.",
     "customer requires data residency in the EU",
     "The customer asked for an EU invoice address for billing."),
    ("Zofia Eriksen is vegan and avoids any food with eggs, milk or honey.",
     "who follows a plant-only diet?",
     "Zofia Eriksen asked for the diet plan of the team fitness challenge."),
    ("The billing migration slipped by six weeks because the old system's export kept timing out.",
     "delay to moving invoices to the new platform",
     "Invoices for the new platform will be sent at the start of each month."),
    ("Camille Quinn cannot look at screens for long after her eye surgery, so send audio notes.",
     "who needs voice messages instead of text for health reasons?",
     "Camille Quinn recorded voice messages for the onboarding course."),
    ("Kestrel Farms lost their entire strawberry harvest to a hailstorm.",
     "crop destroyed by extreme weather",
     "Kestrel Farms asked about weather insurance for next year."),
    ("Luca Gallagher keeps booking meeting rooms and never turning up.",
     "who reserves conference spaces and doesn't show?",
     "Luca Gallagher asked facilities to add more conference spaces."),
    ("The new espresso machines cost twice what was budgeted because of import duties.",
     "coffee equipment went over budget due to customs charges",
     "The coffee equipment for the Lisbon office arrived on time."),
    ("Bilal Yilmaz's mother is in hospital, so he is working from Izmir for a few weeks.",
     "who is temporarily remote because of a family emergency?",
     "Bilal Yilmaz asked whether the remote working policy covers a family wedding."),
    ("Redwood Dental's receptionist kept sending us patient X-rays by unencrypted email.",
     "client sharing sensitive medical images insecurely",
     "Redwood Dental asked for secure storage pricing for medical images."),
    ("Ivan Kowalski stammers on the phone and much prefers chat for support questions.",
     "who would rather type than talk when asking for help?",
     "Ivan Kowalski asked for help setting up the chat widget on the website."),
    ("The Hamburg team celebrates every closed deal by ringing a ship's bell in the office.",
     "sales tradition for marking a won contract",
     "The sales team in Hamburg won a contract with a shipping company."),
    ("Saffron Kitchens opened a third restaurant and needs three more point-of-sale terminals.",
     "customer expansion creating demand for extra checkout hardware",
     "Saffron Kitchens asked whether checkout hardware can be leased."),
]  # fmt: skip

ORDER_ISSUES = [
    "the customer was charged twice",
    "it shipped to their old address",
    "two items were missing",
    "they asked to cancel it",
    "it is stuck in customs in Rotterdam",
    "finance approved a refund",
    "the pallet arrived crushed",
    "it was delivered to a neighbour",
    "the wrong model was sent",
]
PART_STATES = [
    "is back-ordered for three weeks",
    "was recalled by the manufacturer",
    "is in stock in Leeds",
    "was replaced by a newer revision",
    "fails the heat test",
    "costs 14 euros more since May",
]
COMPONENTS = [
    "fan assembly",
    "hinge kit",
    "power board",
    "display cable",
    "battery pack",
    "print head",
    "filter housing",
    "castor set",
    "thermostat",
    "gas spring",
]
TICKET_STORIES = [
    "login loop on Safari; fixed by clearing the SSO cookie",
    "CSV export empty; a timezone bug",
    "duplicate invoices; the retry job ran twice",
    "slow dashboard; missing database index",
    "password reset emails in spam; SPF record fixed",
    "mobile push not arriving; expired APNs key",
]
ATTRIBUTES = [  # (episode template, query template, values)
    ("{n} always wants {v} seat when we book flights.", "which seat does {n} want on flights?",
     ["an aisle", "a window", "an exit-row"]),
    ("For the team hoodies, {n} takes size {v}.", "{n} hoodie size", ["small", "medium", "large", "XL"]),
    ("{n} reports to {v} since the reorganisation.", "who is {n}'s manager?",
     ["Mei Nakamura", "Oscar Dubois", "Rosa Lindqvist", "Sanjay Adeyemi"]),
    ("{n}'s birthday is on {v}; the team usually orders a cake.", "when is {n}'s birthday?",
     ["12 May", "3 October", "28 February", "19 July"]),
    ("{n} is {v}, so check the catering menu before events.", "does {n} have dietary requirements?",
     ["vegetarian", "gluten-free", "halal", "pescatarian"]),
    ("{n}'s direct line is {v}.", "phone number for {n}", ["+44 113 496 0712", "+351 21 555 0193"]),
    ("{n} works from the {v} office on Mondays and Wednesdays.", "which office is {n} in?",
     ["Leeds", "Lisbon", "Krakow", "Dublin"]),
]  # fmt: skip
DIACRITIC_NAMES = ["Zoë Müller", "José Peña", "Björn Åkesson", "Łukasz Wiśniewski", "Søren Håkansson",
                   "Anaïs Lefèvre", "Çağla Öztürk", "Jiří Dvořák"]  # fmt: skip
TOPICS = {  # phrase in the query: three episodes of the same recurring event, in three months
    "board meeting": ["Board meeting: approved hiring two support engineers and froze travel spending.",
                      "Board meeting: the directors rejected the proposal to open a Madrid branch.",
                      "Board meeting: agreed to raise prices by four percent from next quarter."],
    "office move": ["Office move: the furniture supplier confirmed forty desks for the new floor.",
                    "Office move: IT will rewire the new floor over one weekend, nobody on site.",
                    "Office move: the old keys must go back to the landlord by the end of the week."],
    "incident review": ["Incident review: checkout was down for 47 minutes after a certificate expired.",
                        "Incident review: a bad config push took search offline for two hours.",
                        "Incident review: the payment provider had a regional outage; we failed over."],
    "team offsite": ["Team offsite: planned the roadmap and went bowling in the evening.",
                     "Team offsite: a facilitator ran a feedback workshop; the venue was too cold.",
                     "Team offsite: cancelled at the last minute because of a train strike."],
    "pricing committee": ["Pricing committee: the starter plan goes from 9 to 12 euros per seat.",
                          "Pricing committee: annual contracts now get two months free.",
                          "Pricing committee: the legacy unlimited plan is closed to new customers."],
    "fire drill": ["Fire drill: evacuated in six minutes; the second floor alarm did not sound.",
                   "Fire drill: out in four minutes, but two visitors were not on the sign-in sheet.",
                   "Fire drill: postponed because of heavy rain and rescheduled by facilities."],
    "security audit": ["Security audit: pen testers found an open admin panel on the staging server.",
                       "Security audit: every laptop passed the disk-encryption check.",
                       "Security audit: weak passwords on three shared mailboxes; resets enforced."],
    "new starters": ["New starters: Amara joined finance and had her laptop on day one.",
                     "New starters: two warehouse staff began, but their badges were not ready.",
                     "New starters: the new head of marketing spent her first week visiting customers."],
    "Larkspur Hotels visit": ["Larkspur Hotels visit: their CTO toured the support floor, asked about SLAs.",
                              "Larkspur Hotels visit: their procurement team came to negotiate discounts.",
                              "Larkspur Hotels visit: we demoed the reporting dashboard; they want a pilot."],
    "sales review": ["Sales review: revenue grew eleven percent, driven by dental practices.",
                     "Sales review: the quarter missed target by six percent as two deals slipped.",
                     "Sales review: the Lisbon team closed the biggest deal in company history."],
}  # fmt: skip
TOPIC_QUESTIONS = ["what happened at the {t} in {m}?", "{t} {m}", "what came out of the {t} in {m}?"]
THREADS = [  # (first session, second session, query, entities, values for x and y)
    ("Agreed with {p} that the {e} offsite is capped at {x} euros for the whole team.",
     "{p} confirmed the {e} offsite venue, {y}, with rooms held until Friday.",
     "{e} offsite budget and venue", ["Lisbon", "Porto", "Seville", "Bruges"],
     ["18,000", "25,000", "31,000", "40,000"], ["Hotel Tivoli", "Casa do Rio", "Palacio Verde", "De Haan"]),
    ("Started talks with {e} about cleaning the office; their first quote was {x} euros a month.",
     "{e} came back with a final offer of {y} euros a month including the windows.",
     "how did the cleaning negotiation with {e} end?",
     ["Sparkle Cleaners", "BrightWay", "Mopright", "CleanCo"],
     ["2,100", "1,850", "2,400", "1,990"], ["1,700", "1,600", "2,050", "1,750"]),
    ("Interviewed {e} for the data engineer role: strong on SQL, needs mentoring on {x}.",
     "{e} accepted our offer and starts on {y}.", "outcome of {e}'s data engineer application",
     ["Ines Moreau", "Tariq Bello", "Greta Holm", "Pavel Novak"],
     ["Terraform", "Kubernetes", "streaming", "dbt"], ["2 March", "16 March", "1 April", "4 May"]),
    ("Lent the demo {e} to {c} for a two-week trial.",
     "{c} returned the demo {e} and wants to buy {x} units.",
     "what happened with the {e} demo unit?",
     ["Aurora desk lamp", "Falcon label printer", "Orbit standing desk", "Zephyr air purifier"],
     ["12", "40", "6", "25"], [""] * 4),
    ("{p} enrolled in the {e} certification course.", "{p} passed the {e} exam with {x} percent.",
     "{p} {e} certification progress", ["AWS Solutions Architect", "PRINCE2", "CISSP", "Scrum Master"],
     ["82", "91", "77", "88"], [""] * 4),
    ("The {e} landlord wants {x} euros per square metre for the new floor.",
     "Signed the lease for the new {e} floor; we move in on {y}.", "{e} office lease terms and move date",
     ["Krakow", "Ghent", "Malmo", "Bilbao"], ["14", "19", "22", "16"],
     ["1 September", "15 July", "3 November", "1 June"]),
    ("{e} complained that support replies have been slow for weeks.",
     "Offered {e} a dedicated account manager; they agreed to renew for {x} more years.",
     "how was the {e} complaint resolved?",
     ["Meridian Optics", "Orchard Vets", "Atlas Freight", "Juniper Health"],
     ["two", "three", "one", "two"], [""] * 4),
    ("Submitted a talk about {x} to {e}.", "{e} accepted our talk; the slot is on {y}.",
     "{e} talk submission status", ["PyCon Lisbon", "DevOpsDays Ghent", "DataConf Lyon", "FinOps Summit"],
     ["search ranking", "serverless costs", "vector indexes", "tenant isolation"],
     ["the first morning", "day two after lunch", "the closing session", "the second morning"]),
    ("Filed an insurance claim for the flooded {e} storeroom, estimated at {x} euros.",
     "The insurer paid {y} euros for the {e} storeroom flood.", "{e} storeroom flood claim payout",
     ["Hamburg", "Valencia", "Turin", "Gdansk"], ["12,000", "8,500", "20,000", "6,400"],
     ["9,800", "8,500", "14,250", "6,000"]),
    ("{e} asked us to integrate with their {x} system for purchase orders.",
     "The {e} purchase-order integration went live; the first order synced on {y}.",
     "{e} purchase order integration status",
     ["Kestrel Farms", "Cobalt Studios", "Saffron Kitchens", "Harbour Dental"],
     ["SAP", "Xero", "NetSuite", "Sage"], ["a Monday", "day one", "the second attempt", "a Friday"]),
]  # fmt: skip


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    rng = random.Random(SEED)
    episodes: list[dict] = []
    queries: list[dict] = []

    def add(content: str, when: datetime | None = None, session: str | None = None) -> str:
        eid = f"e{len(episodes):05d}"
        scope, _, _, _ = c.synthetic(rng.randrange(10**6), seed=SEED)
        when = when or c.START + timedelta(days=rng.randrange(c.SPAN_DAYS), minutes=rng.randrange(600))
        episodes.append(
            {
                "type": "episode",
                "id": eid,
                "scope": scope,
                "session_id": session or f"lab-{eid}",
                "occurred_at": when.isoformat().replace("+00:00", "Z"),
                "content": content,
            }
        )
        return eid

    def ask(category: str, kind: str, query: str, relevant: list[str]) -> None:
        queries.append(
            {
                "type": "query",
                "id": f"q{len(queries):03d}",
                "category": category,
                "kind": kind,
                "query": query,
                "relevant": relevant,
            }
        )

    for i in range(FILLER):
        scope, session, when, content = c.synthetic(i, seed=SEED)
        episodes.append(
            {
                "type": "episode",
                "id": f"e{i:05d}",
                "scope": scope,
                "session_id": session,
                "occurred_at": when.isoformat().replace("+00:00", "Z"),
                "content": content,
            }
        )
    blob = " ".join(e["content"] for e in episodes)
    for answer, query, trap in PARAPHRASES:
        ask("paraphrase", "paraphrase", query, [add(answer)])
        add(trap)
    identifiers(rng, add, ask, blob)
    for topic, texts in TOPICS.items():
        month = rng.randint(2, 6)
        for text, (year, mon) in zip(texts, [(2026, month), (2026, month - 1), (2025, month)], strict=True):
            when = datetime(year, mon, rng.randint(1, 28), rng.randint(8, 17), tzinfo=UTC)
            label = f"{c.MONTHS[mon - 1]} {year}"
            ask("date", "topic+month", rng.choice(TOPIC_QUESTIONS).format(t=topic, m=label), [add(text, when)])
    for k, (first, second, question, entities, xs, ys) in enumerate(THREADS):
        start = c.START + timedelta(days=rng.randrange(c.SPAN_DAYS - 60))
        for j, entity in enumerate(entities):
            values = {"e": entity, "p": c.person(rng), "c": rng.choice(c.CUSTOMERS), "x": xs[j], "y": ys[j]}
            a = add(first.format(**values), start + timedelta(days=j), f"thread-{k}-{j}-a")
            b = add(second.format(**values), start + timedelta(days=j + rng.randint(20, 45)), f"thread-{k}-{j}-b")
            ask("multi-session", "two sessions", question.format(**values), [a, b])
    days: dict[str, list[str]] = {}
    for e in episodes:
        days.setdefault(e["occurred_at"][:10], []).append(e["id"])
    candidates = sorted(d for d, ids in days.items() if 2 <= len(ids) <= 6 and d >= "2025-06")
    one_digit = [d for d in candidates if d[-2] == "0"]
    picked = rng.sample(one_digit, 12) + rng.sample([d for d in candidates if d not in one_digit], 13)
    for n, day in enumerate(picked):
        d = datetime.fromisoformat(day)
        month = c.MONTHS[d.month - 1]
        text, kind = [(f"what happened on {d.day} {month} {d.year}?", "day"),
                      (f"what happened on {day}?", "day-iso"),
                      (f"anything noted on {month} {d.day}, {d.year}", "day")][n % 3]  # fmt: skip
        ask("date", kind + ("-1digit" if d.day < 10 and kind == "day" else ""), text, days[day])
    meta = {"type": "meta", "seed": SEED, "episodes": len(episodes), "queries": len(queries)}
    with OUT.open("w", encoding="utf-8") as out:
        for line in [meta, *episodes, *queries]:
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
    print(f"wrote {OUT.relative_to(c.ROOT)}: {len(episodes)} episodes, {len(queries)} queries")


def swap(number: int) -> int:
    """The number with its last two digits swapped (or its last digit changed if they are equal)."""
    digits = str(number)
    if digits[-1] == digits[-2]:
        return number - 1 if digits[-1] != "0" else number + 1
    return int(digits[:-2] + digits[-1] + digits[-2])


def identifiers(rng: random.Random, add: Callable[..., str], ask: Callable[..., None], blob: str) -> None:
    """Orders, part codes, tickets and names, each with near-miss distractors."""
    for _ in range(25):
        n = rng.randint(70000, 99999)
        customer, issues = rng.choice(c.CUSTOMERS), rng.sample(ORDER_ISSUES, 3)
        target = add(f"Order {n} for {customer}: {issues[0]}.")
        add(f"Order {n + rng.randint(1, 9)} for {customer}: {issues[1]}.")
        add(f"Order {swap(n)} for {rng.choice(c.CUSTOMERS)}: {issues[2]}.")
        add(f"Order {rng.randint(70000, 99999)} for {rng.choice(c.CUSTOMERS)}: {issues[0]}.")
        question = rng.choice(["what happened with order {n}?", "order #{n} status"])
        ask("identifier", "order", question.format(n=n), [target])
    for _ in range(20):
        code = c.part_code(rng)
        while code in blob:
            code = c.part_code(rng)
        comps, states = rng.sample(COMPONENTS, 3), rng.sample(PART_STATES, 3)
        target = add(f"Part {code}, the {comps[0]}, {states[0]}.")
        add(f"Part {code[:-1]}{'Q' if code[-1] != 'Q' else 'R'}, the {comps[1]}, {states[1]}.")
        add(f"Part {code[:2]}{int(code[2:4]) % 89 + 10}{code[4:]}, the {comps[2]}, {states[2]}.")
        add(f"Part {c.part_code(rng)}, the {comps[0]}, {states[1]}.")
        ask("identifier", "part code", rng.choice(["is {p} available?", "what is the status of part {p}?"])
            .format(p=code), [target])  # fmt: skip
    for _ in range(15):
        t = rng.randint(30000, 39999)
        stories = rng.sample(TICKET_STORIES, 3)
        target = add(f"INC-{t}: {stories[0]}.")
        add(f"INC-{t + 1}: {stories[1]}.")
        add(f"INC-{swap(t)}: {stories[2]}.")
        ask("identifier", "ticket", f"how was INC-{t} resolved?", [target])
    names = DIACRITIC_NAMES + [f"{rng.choice(c.FIRST)} {rng.choice(c.LAST)}" for _ in range(17)]
    for n, name in enumerate(names):
        first, last = name.split()
        (tmpl, question, values), other = rng.sample(ATTRIBUTES, 2)
        target = add(tmpl.format(n=name, v=values[0]))
        add(tmpl.format(n=f"{first} {rng.choice([x for x in c.LAST if x != last])}", v=values[1]))
        add(tmpl.format(n=f"{rng.choice([x for x in c.FIRST if x != first])} {last}", v=values[-1]))
        add(other[0].format(n=name, v=other[2][0]))  # same person, another attribute
        ask("identifier", "name (diacritics)" if n < len(DIACRITIC_NAMES) else "name",
            question.format(n=name), [target])  # fmt: skip


if __name__ == "__main__":
    main()
