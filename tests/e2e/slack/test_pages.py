"""The review page and the link page in a real browser: headless Chromium driven by Playwright,
signing in through the OpenID provider, against `accessgate serve` and the Slack server.

A reviewer opens the card's link, signs in at the provider, sees the review and approves it: the
Slack card changes. Then they link their Slack account from the link `/accessgate link` gave.
"""

import os
import re
import shutil
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from testing.oidc_provider import CLIENT_ID, CLIENT_SECRET, OidcProvider, sign_in_at_provider
from testing.slack import SlackServer, text_of
from tests.e2e.slack.gateway import CHANNEL, REQUESTER, UNLINKED, card_of, chat_config

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Set, the test leaves its picture of the review page there (the README's is one).
SCREENSHOT = os.environ.get("ACCESSGATE_REVIEW_PAGE_SCREENSHOT")


@pytest.fixture
def provider(tmp_path, server_port) -> Iterator[OidcProvider]:
    provider = OidcProvider(
        tmp_path, redirect_uris=[f"http://127.0.0.1:{server_port}/api/callback"]
    )
    provider.set_account("root", email="root@example.com", name="Root Admin", groups=["admin"])
    provider.set_account("rita", email="rita@example.com", name="Rita Requester", groups=["dev"])
    provider.set_account("dan", email="dan@example.com", name="Dan Reviewer", groups=["dba"])
    provider.start()
    yield provider
    provider.stop()


@pytest.fixture
def environment(environment, provider, server_port) -> dict[str, str]:
    return {
        **environment,
        "ACCESSGATE_AUTH": "oidc",
        "ACCESSGATE_PUBLIC_URL": f"http://127.0.0.1:{server_port}",
        "ACCESSGATE_OIDC_ISSUER_URL": provider.issuer,
        "ACCESSGATE_OIDC_CLIENT_ID": CLIENT_ID,
        "ACCESSGATE_OIDC_CLIENT_SECRET": CLIENT_SECRET,
    }


@pytest.fixture
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            # This machine's network is closed: Chromium's own background calls would only fail.
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield browser
        browser.close()


def api_token(api_url: str, login: str) -> dict[str, str]:
    """Sign in through the provider as a command-line client would; the API token."""
    with httpx.Client(follow_redirects=True, timeout=30) as client:
        login_url = client.get(f"{api_url}/login").json()["login_url"]
        answer = sign_in_at_provider(client, login_url, login)
    assert answer.status_code == 200, answer.text
    return {"Authorization": f"Bearer {answer.json()['access_token']}"}


@pytest.fixture
def api(server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=30) as client:
        yield client


def set_up(server: str, api: httpx.Client) -> tuple[dict[str, str], dict[str, str]]:
    admin, rita = api_token(server, "root"), api_token(server, "rita")
    assert api.post("/connections", json={"name": "pg-prod", "type": "database"}, headers=admin)
    plugin = {"name": "review", "connections": [{"name": "pg-prod", "config": ["dba"]}]}
    assert api.post("/plugins", json=plugin, headers=admin).status_code == 201
    me = api.get("/users/me", headers=rita).json()
    api.patch(f"/users/{me['id']}", json={"chat_id": REQUESTER}, headers=admin)
    chat = {
        "name": "chat",
        "connections": [{"name": "pg-prod", "config": [CHANNEL]}],
        "config": chat_config(),
    }
    assert api.post("/plugins", json=chat, headers=admin).status_code == 201
    return admin, rita


def sign_in_at_provider_page(page: Page, login: str) -> None:
    """The provider's own login and consent pages, as a person fills them in."""
    page.locator('input[name="login"]').fill(login)
    page.locator('input[name="password"]').fill("any")
    page.locator('button[type="submit"]').click()
    page.locator('button[type="submit"]').click()  # consent


def test_a_reviewer_signs_in_approves_on_the_page_and_links_slack(
    server, api: httpx.Client, slack: SlackServer, browser: Browser
):
    _admin, rita = set_up(server, api)
    opened = api.post(
        "/sessions",
        json={
            "connection": "pg-prod",
            "script": "UPDATE orders SET status = 'refunded' WHERE id = 4711;",
            "reason": "INC-2231: the customer was charged twice",
        },
        headers=rita,
    )
    assert opened.status_code == 201, opened.text
    session = opened.json()
    card = card_of(slack, session)
    link = re.search(r"<(http[^|>]+/reviews/[0-9a-f-]+)\|Open the review page>", text_of(card))
    assert link is not None, text_of(card)

    page = browser.new_page()
    page.goto(link.group(1))
    sign_in_at_provider_page(page, "dan")

    expect(page.locator("#status")).to_have_text("pending")
    expect(page.locator("#requester")).to_contain_text("Rita Requester")
    expect(page.locator("#script")).to_contain_text("WHERE id = 4711")
    expect(page.locator("#reason")).to_have_text("INC-2231: the customer was charged twice")
    cookie = next(c for c in page.context.cookies() if c["name"] == "accessgate_session")
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Lax"
    if SCREENSHOT:
        page.set_viewport_size({"width": 1000, "height": 1100})
        page.screenshot(path=SCREENSHOT, full_page=True)

    page.get_by_role("button", name="Approve").click()

    expect(page.locator("#done")).to_have_text("Your approval is recorded.")
    expect(page.locator("#status")).to_have_text("approved")
    expect(page.locator("#decisions")).to_contain_text("Dan Reviewer")
    expect(page.locator("#decisions")).to_contain_text("page")
    slack.wait_for(
        lambda: "APPROVED" in text_of(slack.message(CHANNEL, card.ts)),
        message="the Slack card did not change",
    )
    assert api.get(f"/reviews/{session['id']}", headers=rita).json()["status"] == "APPROVED"

    # Linking: /accessgate link answers with a one-time link to the link page.
    slack.slash_command(UNLINKED, "link")
    slack.wait_for(lambda: slack.responses, message="no answer to /accessgate link")
    link_url = re.search(
        r"<(http[^|>]+/chat/link\?code=\w+)\|", slack.responses[-1]["body"]["text"]
    )
    assert link_url is not None
    page.goto(link_url.group(1))
    page.get_by_role("button", name="Link my Slack account").click()

    expect(page.locator("#message")).to_contain_text("Your Slack account is linked")
    dan = api_token(server, "dan")
    assert api.get("/users/me", headers=dan).json()["chat_id"] == UNLINKED
