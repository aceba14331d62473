"""Benchmark: the Slack bot under load, clicks on review cards and a burst of new cards.

``accessgate serve`` runs as a user would, in its own process, on a fresh SQLite database (the
review benchmarks cover PostgreSQL; here the database is not what is measured). This process is
the load generator and hosts the Slack-compatible server of testing/slack/ in a
background thread: the bot's own slack_sdk / slack_bolt clients call its Web API and hold a
Socket Mode WebSocket to it. That server answers 429 to any post beyond Slack's pace of about one
message per second per channel and counts each one as a pacing violation; the bot keeps its
default pace of one new card per second per channel.

Ten connections ``db-0``..``db-9``, each reviewed by the group ``dba`` and mapped to its own
channel ``C0BENCH0``..``C0BENCH9``; a requester and a reviewer with linked Slack accounts, so
every approval also sends the requester a direct message. The load generator shares the machine
(and its CPUs) with the server, as the other benchmarks' wrk does.

1. Baseline: ``GET /api/healthz`` from 16 threads with httpx, the concurrency of the clicks.
2. Clicks: 500 pending reviews over the ten connections, opened with concurrent
   ``POST /api/sessions``; once every card is posted (about 50 s at the pace), the reviewer
   clicks Approve on each card, 16 clicks in flight. Click to ack is the Slack server's
   ``Ack.elapsed`` (envelope sent to ack received); the bot acks before it decides, so clicks
   per second count acks, and the decisions queue behind them. Click to card updated is the
   monotonic time the Slack server stored the first ``chat.update`` of the card (which made it
   APPROVED) minus the monotonic time taken just before the click was handed to the Slack
   server: same process, same clock, and if anything a little long, since it includes the
   Slack server's own hand-over. Every review must then be APPROVED through the API, every card
   must say APPROVED and offer only Revoke, and no review may have a second card.
3. Burst: 1,000 reviews, 100 per connection, opened with concurrent POSTs as fast as the API
   takes them; timed from the first POST to the moment the last card appears. Every review must
   have exactly one card, in its own channel, and no card channel may see a pacing violation
   (in the whole run). Refusals in other channels, the requester's DMs, are reported only.

Results go to stdout and bench/results/slack.md; the server's log to
bench/results/server-slack.log. The exit status is 1 when a card is lost or duplicated or a check
fails; missing a performance target is reported, not fatal.

Run it with ``make bench`` or ``.venv/bin/python -m bench.slack``.
"""
