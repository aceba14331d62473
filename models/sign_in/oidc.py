"""Sign-in with the organization's OpenID provider: the code flow with PKCE, and token checks.

The provider's endpoints come from its discovery document and its keys from its JWKS, both
fetched on first use. A token signed with a key we have not seen makes the JWKS be fetched
again (the provider rotated its keys), but at most once a minute and by one thread at a time:
anyone can send a token with a made-up ``kid``, and must not make the service fetch for each.
Tokens signed with known keys are verified from the keys in hand, never waiting on a fetch.

Bearer tokens on API calls must be *access* tokens. An ID token is for this service's sign-in
only: accepted as a bearer, anyone who ever saw one (another client of the same provider, a log)
could call the API with it. So a JWT is verified here only when it says it is an access token
(``typ: at+jwt``, RFC 9068) or when ``ACCESSGATE_OIDC_AUDIENCE`` names the audience the provider
puts in its access tokens (ID tokens carry the client id instead). Any other token is shown to
the provider's userinfo endpoint, which accepts only access tokens; its answers, refusals
included, are cached briefly so a burst of calls costs one round trip.
"""

import base64
import hashlib
import math
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt

from models.core import errors

HTTP_TIMEOUT_SECONDS = 10
USERINFO_CACHE_SECONDS = 60
USERINFO_REFUSAL_CACHE_SECONDS = 30
JWKS_REFETCH_INTERVAL_SECONDS = 60
MAX_CACHED_USERINFO = 10_000
ACCESS_TOKEN_TYPES = frozenset({"at+jwt", "application/at+jwt"})
# Asymmetric algorithms only: "none" and HMAC (which a forger could key with public data) are
# never accepted, whatever the token's header claims.
ACCEPTED_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "EdDSA",
)


@dataclass(frozen=True)
class Identity:
    """Who the provider says signed in."""

    sub: str
    email: str | None
    name: str | None
    groups: list[str] | None


class OidcClient:
    """One relying party of one provider; thread-safe, caches discovery, keys and userinfo."""

    def __init__(
        self,
        *,
        issuer: str,
        client_id: str,
        client_secret: str,
        redirect_uri: str,
        scopes: str,
        groups_claim: str,
        audience: str = "",
        jwks_refetch_seconds: float = JWKS_REFETCH_INTERVAL_SECONDS,
        http: httpx.Client | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.issuer = issuer.rstrip("/")
        self.client_id = client_id
        self.client_secret = client_secret
        self.redirect_uri = redirect_uri
        self.scopes = scopes
        self.groups_claim = groups_claim
        if audience and audience == client_id:
            raise ValueError(
                "ACCESSGATE_OIDC_AUDIENCE must name the API's audience in access tokens, not the "
                "client id (which ID tokens carry)"
            )
        self.audience = audience
        self._jwks_refetch_seconds = jwks_refetch_seconds
        self._http = http or httpx.Client(timeout=HTTP_TIMEOUT_SECONDS)
        self._clock = clock
        self._discovery: dict[str, Any] | None = None
        self._jwks: jwt.PyJWKSet | None = None
        self._jwks_fetched_at = -math.inf
        self._jwks_fetch = threading.Lock()  # taken only to fetch: one fetch at a time
        self._userinfo_cache: dict[str, tuple[float, str | None]] = {}

    # -- provider metadata ----------------------------------------------------------------

    def discovery(self) -> dict[str, Any]:
        """The provider's discovery document (fetched once)."""
        if self._discovery is None:
            document = self._get_json(f"{self.issuer}/.well-known/openid-configuration")
            if str(document.get("issuer", "")).rstrip("/") != self.issuer:
                raise errors.ProviderUnavailable(
                    "the identity provider's discovery document names another issuer"
                )
            self._discovery = document
        return self._discovery

    def _signing_key(self, kid: str | None, *, from_provider: bool) -> jwt.PyJWK:
        """The provider's key ``kid``; fetched again if unknown, within limits.

        ``from_provider``: the token came straight from the provider's token endpoint (not
        from a client), so an unknown key means a rotation, and the keys are fetched anew
        however recently they were.
        """
        key = self._known_key(kid)
        if key is not None:
            return key
        # Nobody waits behind a fetch already in flight once keys are known: a burst of made-up
        # kids costs one fetch, and a thread each for no longer than it takes to say no.
        if self._jwks_fetch.acquire(blocking=self._jwks is None or from_provider):
            try:
                key = self._known_key(kid)  # fetched while this thread waited
                since = self._clock() - self._jwks_fetched_at
                due = from_provider or since >= self._jwks_refetch_seconds
                if key is None and due:
                    self._jwks_fetched_at = self._clock()  # failed fetches count too
                    self._jwks = self._fetch_keys()
                    key = self._known_key(kid)
            finally:
                self._jwks_fetch.release()
        if key is None and self._jwks is None:
            raise errors.ProviderUnavailable(
                "the identity provider's keys could not be fetched; the service tries again "
                "within a minute"
            )
        if key is None:
            raise errors.Unauthenticated(
                "the token is signed with a key the provider does not have"
            )
        return key

    def _fetch_keys(self) -> jwt.PyJWKSet:
        try:
            return jwt.PyJWKSet.from_dict(self._get_json(self.discovery()["jwks_uri"]))
        except (jwt.PyJWKSetError, jwt.PyJWKError, KeyError) as exc:
            raise errors.ProviderUnavailable(
                "the identity provider's key set has no usable key"
            ) from exc

    def _known_key(self, kid: str | None) -> jwt.PyJWK | None:
        keys = self._jwks  # one snapshot: a fetch replaces the set, it never edits it
        if keys is None:
            return None
        for key in keys.keys:
            if kid is None or key.key_id == kid:
                return key
        return None

    def _get_json(self, url: str, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self._http.get(url, **kwargs)
            response.raise_for_status()
            document = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise errors.ProviderUnavailable(
                f"the identity provider cannot be reached ({type(exc).__name__})"
            ) from exc
        if not isinstance(document, dict):
            raise errors.ProviderUnavailable("the identity provider answered something unexpected")
        return document

    # -- the code flow --------------------------------------------------------------------

    def authorization_url(self, *, state: str, nonce: str, code_verifier: str) -> str:
        """Where to send the browser: the code flow with this state, nonce and PKCE verifier."""
        challenge = (
            base64.urlsafe_b64encode(hashlib.sha256(code_verifier.encode()).digest())
            .decode()
            .rstrip("=")
        )
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.client_id,
                "redirect_uri": self.redirect_uri,
                "scope": self.scopes,
                "state": state,
                "nonce": nonce,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
            }
        )
        return f"{self.discovery()['authorization_endpoint']}?{query}"

    def finish_login(self, *, code: str, code_verifier: str, nonce: str) -> tuple[Identity, str]:
        """Exchange the code; return who signed in and the access token for API calls."""
        try:
            response = self._http.post(
                self.discovery()["token_endpoint"],
                data={
                    "grant_type": "authorization_code",
                    "code": code,
                    "redirect_uri": self.redirect_uri,
                    "code_verifier": code_verifier,
                },
                auth=(self.client_id, self.client_secret),
            )
        except httpx.HTTPError as exc:
            raise errors.ProviderUnavailable("the identity provider cannot be reached") from exc
        if response.status_code != 200:
            raise errors.Unauthenticated(
                "the identity provider refused the sign-in code; start the sign-in again"
            )
        tokens = response.json()
        claims = self.verify_id_token(str(tokens.get("id_token", "")), nonce=nonce)
        access_token = tokens.get("access_token")
        if not isinstance(access_token, str) or not access_token:
            raise errors.Unauthenticated("the identity provider issued no access token")
        return self.identity(claims), access_token

    def verify_id_token(self, token: str, *, nonce: str | None) -> dict[str, Any]:
        """The claims of a valid ID token: signature, issuer, audience, expiry and nonce."""
        claims = self._verify_jwt(token, audience=self.client_id, from_provider=True)
        if nonce is not None and not secrets.compare_digest(str(claims.get("nonce", "")), nonce):
            raise errors.Unauthenticated("the ID token was not issued for this sign-in")
        return claims

    def identity(self, claims: Mapping[str, Any]) -> Identity:
        """The user the claims describe; groups only when the groups claim is present."""
        groups = claims.get(self.groups_claim)
        return Identity(
            sub=str(claims["sub"]),
            email=claims.get("email") if isinstance(claims.get("email"), str) else None,
            name=claims.get("name") if isinstance(claims.get("name"), str) else None,
            groups=[str(g) for g in groups] if isinstance(groups, list) else None,
        )

    # -- bearer tokens on API calls -------------------------------------------------------

    def subject_of(self, token: str) -> str:
        """The ``sub`` of a valid access token, or Unauthenticated. ID tokens are refused."""
        if token.count(".") == 2:
            try:
                token_type = str(jwt.get_unverified_header(token).get("typ", "")).lower()
            except jwt.InvalidTokenError as exc:
                raise errors.Unauthenticated("the token is not a valid JWT") from exc
            if token_type in ACCESS_TOKEN_TYPES:
                audience = self.audience or self.client_id
                return str(self._verify_jwt(token, audience=audience)["sub"])
            if self.audience:
                return str(self._verify_jwt(token, audience=self.audience)["sub"])
        return self._userinfo_subject(token)

    def _verify_jwt(
        self, token: str, *, audience: str, from_provider: bool = False
    ) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise errors.Unauthenticated("the token is not a valid JWT") from exc
        if header.get("alg") not in ACCEPTED_ALGORITHMS:
            raise errors.Unauthenticated("the token's signing algorithm is not accepted")
        key = self._signing_key(header.get("kid"), from_provider=from_provider)
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[str(header["alg"])],
                audience=audience,
                issuer=self.discovery()["issuer"],
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise errors.Unauthenticated("the token has expired; sign in again") from exc
        except jwt.InvalidTokenError as exc:
            raise errors.Unauthenticated(f"the token is not valid for this service: {exc}") from exc
        return claims

    def _userinfo_subject(self, token: str) -> str:
        cache_key = hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()
        cached = self._userinfo_cache.get(cache_key)
        if cached is not None and cached[0] > self._clock():
            if cached[1] is None:
                raise errors.Unauthenticated(REFUSED_BY_PROVIDER)
            return cached[1]
        try:
            response = self._http.get(
                self.discovery()["userinfo_endpoint"],
                headers={"Authorization": f"Bearer {token}"},
            )
        except httpx.HTTPError as exc:  # not cached: the next call asks again
            raise errors.ProviderUnavailable("the identity provider cannot be reached") from exc
        sub = _userinfo_sub(response)
        lifetime = USERINFO_CACHE_SECONDS if sub else USERINFO_REFUSAL_CACHE_SECONDS
        if len(self._userinfo_cache) >= MAX_CACHED_USERINFO:
            self._userinfo_cache.clear()
        self._userinfo_cache[cache_key] = (self._clock() + lifetime, sub)
        if sub is None:
            raise errors.Unauthenticated(REFUSED_BY_PROVIDER)
        return sub


REFUSED_BY_PROVIDER = "the identity provider does not accept this token"


def _userinfo_sub(response: httpx.Response) -> str | None:
    """The ``sub`` of a userinfo answer; None when the provider refused the token."""
    if response.status_code >= 500:  # the provider's trouble, not the token's: not cached
        raise errors.ProviderUnavailable(
            f"the identity provider answered {response.status_code} at its userinfo endpoint"
        )
    if response.status_code != 200:
        return None
    try:
        sub = response.json().get("sub")
    except (ValueError, AttributeError):
        return None
    return sub if isinstance(sub, str) and sub else None
