"""The OIDC relying party against a fake provider (httpx MockTransport) and local JWTs."""

import time

import httpx
import jwt
import pytest

from models.core import errors
from models.sign_in.oidc import OidcClient
from testing.oidc_provider import signing_key

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

    def token(self, **overrides: object) -> str:
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": CLIENT_ID, "sub": "alice", "iat": now, "exp": now + 60}
        claims.update(overrides)
        kid = self.public_jwks["keys"][0]["kid"]
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture
def provider() -> FakeProvider:
    return FakeProvider()


@pytest.fixture
def client(provider) -> OidcClient:
    return OidcClient(
        issuer=ISSUER,
        client_id=CLIENT_ID,
        client_secret="s",
        redirect_uri="http://127.0.0.1:8009/api/callback",
        scopes="openid email profile groups",
        groups_claim="groups",
        http=httpx.Client(transport=httpx.MockTransport(provider.handle)),
    )


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
        {"sub": "alice"}, "public-data-known-to-anyone-32-bytes", algorithm="HS256"
    )

    with pytest.raises(errors.Unauthenticated, match="algorithm is not accepted"):
        client.subject_of(hmac_token)
    assert "/jwks" not in provider.requests


def test_an_unknown_key_id_fetches_the_keys_again_once(client, provider):
    assert client.subject_of(provider.token()) == "alice"
    provider.rotate()

    assert client.subject_of(provider.token()) == "alice"
    assert provider.requests.count("/jwks") == 2
    assert provider.requests.count("/.well-known/openid-configuration") == 1


def test_a_key_the_provider_never_had_is_refused(client, provider):
    stranger = FakeProvider()
    stranger.rotate()

    with pytest.raises(errors.Unauthenticated, match="key the provider does not have"):
        client.subject_of(stranger.token())


def test_opaque_tokens_are_checked_at_userinfo_and_cached_briefly(client, provider):
    assert client.subject_of("opaque-ok") == "alice"
    assert client.subject_of("opaque-ok") == "alice"
    assert provider.requests.count("/me") == 1

    with pytest.raises(errors.Unauthenticated, match="does not accept this token"):
        client.subject_of("opaque-bad")


def test_a_discovery_document_for_another_issuer_is_refused(client, provider):
    provider.discovery["issuer"] = "https://impostor.example"

    with pytest.raises(errors.ProviderUnavailable, match="names another issuer"):
        client.start_login()


def test_the_login_url_carries_pkce_state_and_nonce(client):
    login = client.start_login()

    query = httpx.URL(login.url).params
    assert login.url.startswith(f"{ISSUER}/auth?")
    assert query["state"] == login.state
    assert query["nonce"] == login.nonce
    assert query["code_challenge_method"] == "S256"
    assert len(query["code_challenge"]) == 43
    assert query["code_challenge"] != login.code_verifier
    assert query["redirect_uri"] == "http://127.0.0.1:8009/api/callback"
