"""Sign-in with the organization's OpenID provider: the code flow with PKCE, and token checks.

The provider's endpoints come from its discovery document and its keys from its JWKS, both
fetched on first use; an ID token signed with a key we have not seen makes the JWKS be fetched
again (the provider rotated its keys). Bearer tokens on API calls are checked against the
provider: a JWT by signature, issuer and audience; an opaque token at the userinfo endpoint,
whose answer is cached briefly so a burst of calls costs one round trip.
"""

import base64
import hashlib
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
import jwt

from models.core import errors

HTTP_TIMEOUT_SECONDS = 10
USERINFO_CACHE_SECONDS = 60
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
class LoginStart:
    """What one sign-in attempt must remember until the provider sends the browser back."""

    url: str
    state: str
    nonce: str
    code_verifier: str


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
        http: httpx.Client | None = None,
    ) -> None:
        self.issuer = issuer.rstrip("/")
        self.client_id = client_id
        self.client_secret = client_secret
        self.redirect_uri = redirect_uri
        self.scopes = scopes
        self.groups_claim = groups_claim
        self._http = http or httpx.Client(timeout=HTTP_TIMEOUT_SECONDS)
        self._discovery: dict[str, Any] | None = None
        self._jwks: jwt.PyJWKSet | None = None
        self._userinfo_cache: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

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

    def _signing_key(self, kid: str | None) -> jwt.PyJWK:
        with self._lock:
            for refresh in (False, True):
                if self._jwks is None or refresh:
                    self._jwks = jwt.PyJWKSet.from_dict(
                        self._get_json(self.discovery()["jwks_uri"])
                    )
                for key in self._jwks.keys:
                    if kid is None or key.key_id == kid:
                        return key
        raise errors.Unauthenticated("the token is signed with a key the provider does not have")

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

    def start_login(self) -> LoginStart:
        """A fresh authorization URL with its state, nonce and PKCE verifier."""
        state = secrets.token_urlsafe(32)
        nonce = secrets.token_urlsafe(32)
        code_verifier = secrets.token_urlsafe(64)
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
        url = f"{self.discovery()['authorization_endpoint']}?{query}"
        return LoginStart(url=url, state=state, nonce=nonce, code_verifier=code_verifier)

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
        claims = self._verify_jwt(token, audience=self.client_id)
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
        """The ``sub`` of a valid access token, or Unauthenticated."""
        if token.count(".") == 2:
            return str(self._verify_jwt(token, audience=self.client_id)["sub"])
        return self._userinfo_subject(token)

    def _verify_jwt(self, token: str, *, audience: str) -> dict[str, Any]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as exc:
            raise errors.Unauthenticated("the token is not a valid JWT") from exc
        if header.get("alg") not in ACCEPTED_ALGORITHMS:
            raise errors.Unauthenticated("the token's signing algorithm is not accepted")
        key = self._signing_key(header.get("kid"))
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
        cache_key = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        cached = self._userinfo_cache.get(cache_key)
        if cached is not None and cached[0] > now:
            return cached[1]
        try:
            response = self._http.get(
                self.discovery()["userinfo_endpoint"],
                headers={"Authorization": f"Bearer {token}"},
            )
        except httpx.HTTPError as exc:
            raise errors.ProviderUnavailable("the identity provider cannot be reached") from exc
        if response.status_code != 200:
            raise errors.Unauthenticated("the identity provider does not accept this token")
        sub = response.json().get("sub")
        if not isinstance(sub, str) or not sub:
            raise errors.Unauthenticated("the identity provider names no user for this token")
        if len(self._userinfo_cache) > 10_000:
            self._userinfo_cache.clear()
        self._userinfo_cache[cache_key] = (now + USERINFO_CACHE_SECONDS, sub)
        return sub
