"""The OIDC relying party against a fake provider (httpx MockTransport) and local JWTs."""

import time

import httpx
import jwt
import pytest

from models.core import errors
from models.sign_in.oidc import OidcClient
from testing.oidc_provider import signing_key
from tests.factories import ManualClock

ISSUER = "https://idp.example"
CLIENT_ID = "accessgate"


class FakeProvider:
    """Discovery, JWKS and userinfo answers, counting the requests made to each."""

    def __init__(self) -> None:
        self.key, jwk = signing_key("k1")
        self.public_jwks = {"keys": [self._public(jwk)]}
        self.discovery = {
            "issuer": ISSUER,
            "authorization_endpoint": f"{ISSUER}/auth",
            "token_endpoint": f"{ISSUER}/token",
            "userinfo_endpoint": f"{ISSUER}/me",
            "jwks_uri": f"{ISSUER}/jwks",
        }
        self.requests: list[str] = []
        self.userinfo_sub = "alice"

    @staticmethod
    def _public(jwk: dict) -> dict:
        return {key: jwk[key] for key in ("kty", "n", "e", "kid", "alg", "use")}

    def rotate(self) -> None:
        self.key, jwk = signing_key("k2")
        self.public_jwks = {"keys": [self._public(jwk)]}

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request.url.path)
        if request.url.path == "/.well-known/openid-configuration":
            return httpx.Response(200, json=self.discovery)
        if request.url.path == "/jwks":
            return httpx.Response(200, json=self.public_jwks)
        if request.url.path == "/me":
            if request.headers["Authorization"] != "Bearer opaque-ok":
                return httpx.Response(401, json={"error": "invalid_token"})
            return httpx.Response(200, json={"sub": self.userinfo_sub})
        return httpx.Response(404)

    def token(self, *, typ: str | None = None, **overrides: object) -> str:
        """An ID token by default; ``typ="at+jwt"`` makes it an access token (RFC 9068)."""
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": CLIENT_ID, "sub": "alice", "iat": now, "exp": now + 60}
        claims.update(overrides)
        headers = {"kid": self.public_jwks["keys"][0]["kid"]}
        if typ is not None:
            headers["typ"] = typ
        return jwt.encode(claims, self.key, algorithm="RS256", headers=headers)


@pytest.fixture
def provider() -> FakeProvider:
    return FakeProvider()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1000.0)


def relying_party(provider: FakeProvider, clock: ManualClock, *, audience: str = "") -> OidcClient:
    return OidcClient(
        issuer=ISSUER,
        client_id=CLIENT_ID,
        client_secret="s",
        redirect_uri="http://127.0.0.1:8009/api/callback",
        scopes="openid email profile groups",
        groups_claim="groups",
        audience=audience,
        http=httpx.Client(transport=httpx.MockTransport(provider.handle)),
        clock=clock,
    )


@pytest.fixture
def client(provider, clock) -> OidcClient:
    return relying_party(provider, clock)


def test_a_valid_id_token_gives_its_claims(client, provider):
    claims = client.verify_id_token(provider.token(nonce="n1", groups=["dev"]), nonce="n1")

    assert claims["sub"] == "alice"
    assert client.identity(claims).groups == ["dev"]


@pytest.mark.parametrize(
    ("overrides", "nonce", "message"),
    [
        ({"nonce": "other"}, "n1", "not issued for this sign-in"),
        ({"aud": "someone-else", "nonce": "n1"}, "n1", "not valid for this service"),
        ({"iss": "https://evil.example", "nonce": "n1"}, "n1", "not valid for this service"),
        ({"exp": 1_000_000_000, "nonce": "n1"}, "n1", "has expired"),
    ],
)
def test_id_tokens_for_another_sign_in_audience_or_issuer_are_refused(
    client, provider, overrides, nonce, message
):
    with pytest.raises(errors.Unauthenticated, match=message):
        client.verify_id_token(provider.token(**overrides), nonce=nonce)


def test_hmac_and_none_tokens_are_refused_before_any_key_is_looked_up(client, provider):
    hmac_token = jwt.encode(
        {"sub": "alice"},
        "public-data-known-to-anyone-32-bytes",
        algorithm="HS256",
        headers={"typ": "at+jwt"},
    )

    with pytest.raises(errors.Unauthenticated, match="algorithm is not accepted"):
        client.subject_of(hmac_token)
    assert "/jwks" not in provider.requests


def test_an_unknown_key_id_fetches_the_keys_again_at_most_once_a_minute(client, provider, clock):
    assert client.subject_of(provider.token(typ="at+jwt")) == "alice"
    provider.rotate()

    with pytest.raises(errors.Unauthenticated, match="key the provider does not have"):
        client.subject_of(provider.token(typ="at+jwt"))
    clock.now += 61
    assert client.subject_of(provider.token(typ="at+jwt")) == "alice"

    assert provider.requests.count("/jwks") == 2
    assert provider.requests.count("/.well-known/openid-configuration") == 1


def test_made_up_key_ids_cost_one_fetch_a_minute_whatever_their_number(client, provider, clock):
    assert client.subject_of(provider.token(typ="at+jwt")) == "alice"
    stranger = FakeProvider()
    stranger.rotate()

    for _ in range(50):
        with pytest.raises(errors.Unauthenticated):
            client.subject_of(stranger.token(typ="at+jwt"))
        clock.now += 1

    # 50 made-up kids within the minute after the first fetch: none fetched again.
    assert provider.requests.count("/jwks") == 1
    clock.now += 60
    with pytest.raises(errors.Unauthenticated):
        client.subject_of(stranger.token(typ="at+jwt"))
    assert provider.requests.count("/jwks") == 2


def test_an_id_token_from_the_provider_is_no_bearer_token(client, provider):
    """An ID token is valid (signature, issuer, client id) but says who signed in, nothing
    more; the API asks the provider, which accepts only access tokens."""
    id_token = provider.token(nonce="n1")
    assert client.verify_id_token(id_token, nonce="n1")["sub"] == "alice"

    with pytest.raises(errors.Unauthenticated, match="does not accept this token"):
        client.subject_of(id_token)
    assert provider.requests.count("/me") == 1


def test_with_an_audience_jwt_access_tokens_for_it_are_verified_locally(provider, clock):
    client = relying_party(provider, clock, audience="https://accessgate.example/api")

    assert client.subject_of(provider.token(aud="https://accessgate.example/api")) == "alice"
    with pytest.raises(errors.Unauthenticated, match="not valid for this service"):
        client.subject_of(provider.token())  # the client id: an ID token
    assert "/me" not in provider.requests


def test_the_client_id_cannot_be_the_audience(provider, clock):
    with pytest.raises(ValueError, match="not the client id"):
        relying_party(provider, clock, audience=CLIENT_ID)


def test_a_key_the_provider_never_had_is_refused(client, provider):
    stranger = FakeProvider()
    stranger.rotate()

    with pytest.raises(errors.Unauthenticated, match="key the provider does not have"):
        client.subject_of(stranger.token(typ="at+jwt"))


def test_opaque_tokens_are_checked_at_userinfo_and_cached_briefly(client, provider):
    assert client.subject_of("opaque-ok") == "alice"
    assert client.subject_of("opaque-ok") == "alice"
    assert provider.requests.count("/me") == 1

    with pytest.raises(errors.Unauthenticated, match="does not accept this token"):
        client.subject_of("opaque-bad")


def test_refusals_at_userinfo_are_cached_briefly_too(client, provider, clock):
    for _ in range(20):
        with pytest.raises(errors.Unauthenticated, match="does not accept this token"):
            client.subject_of("opaque-bad")
    assert provider.requests.count("/me") == 1

    clock.now += 31
    with pytest.raises(errors.Unauthenticated):
        client.subject_of("opaque-bad")
    assert provider.requests.count("/me") == 2


def test_a_discovery_document_for_another_issuer_is_refused(client, provider):
    provider.discovery["issuer"] = "https://impostor.example"

    with pytest.raises(errors.ProviderUnavailable, match="names another issuer"):
        client.authorization_url(state="s", nonce="n", code_verifier="v" * 43)


def test_the_login_url_carries_pkce_state_and_nonce(client):
    verifier = "v" * 64
    url = client.authorization_url(state="the-state", nonce="the-nonce", code_verifier=verifier)

    query = httpx.URL(url).params
    assert url.startswith(f"{ISSUER}/auth?")
    assert query["state"] == "the-state"
    assert query["nonce"] == "the-nonce"
    assert query["code_challenge_method"] == "S256"
    assert len(query["code_challenge"]) == 43
    assert query["code_challenge"] != verifier
    assert query["redirect_uri"] == "http://127.0.0.1:8009/api/callback"


def test_a_provider_whose_keys_cannot_be_fetched_is_unavailable_and_asked_once_a_minute(
    client, provider, clock
):
    token = provider.token(typ="at+jwt")
    provider.public_jwks = {"keys": []}

    with pytest.raises(errors.ProviderUnavailable, match="no usable key"):
        client.subject_of(token)
    for _ in range(4):
        with pytest.raises(errors.ProviderUnavailable, match="tries again within a minute"):
            client.subject_of(token)

    assert provider.requests.count("/jwks") == 1
