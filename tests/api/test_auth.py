"""Bearer tokens: who gets in, who is refused, and with what message."""

from datetime import UTC, datetime, timedelta

import jwt
import pytest

from models.sign_in.tokens import AUDIENCE, ISSUER
from tests.factories import TEST_SECRET_KEY, make_user


def forge(claims_override=None, *, key=TEST_SECRET_KEY, algorithm="HS256", headers=None):
    now = datetime.now(UTC)
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "alice",
        "iat": now,
        "exp": now + timedelta(minutes=5),
    }
    claims.update(claims_override or {})
    return jwt.encode(claims, key, algorithm=algorithm, headers=headers)


def alg_none_token():
    # PyJWT will not sign with "none"; build the unsigned token by hand, as an attacker would.
    header = jwt.utils.base64url_encode(b'{"alg":"none","typ":"JWT"}').decode()
    exp = int((datetime.now(UTC) + timedelta(minutes=5)).timestamp())
    body = jwt.utils.base64url_encode(
        f'{{"iss":"{ISSUER}","aud":"{AUDIENCE}","sub":"alice","iat":1,"exp":{exp}}}'.encode()
    ).decode()
    return f"{header}.{body}."


@pytest.fixture
def alice(engine):
    return make_user(engine, "alice", ["dba"])


def test_a_valid_token_identifies_the_user(client, alice):
    response = client.get("/api/users/me", headers=alice.headers)

    assert response.status_code == 200
    assert response.json()["sub"] == "alice"
    assert response.json()["groups"] == ["dba"]
    assert response.json()["status"] == "active"


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ({}, "send an Authorization: Bearer <token> header"),
        ({"Authorization": "Basic YWxpY2U6cHc="}, "send an Authorization: Bearer <token> header"),
        ({"Authorization": "Bearer not-a-jwt"}, "the token is not valid for this service"),
    ],
)
def test_missing_or_malformed_tokens_are_401(client, alice, headers, message):
    response = client.get("/api/users/me", headers=headers)

    assert response.status_code == 401
    assert response.json() == {"message": message}
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(lambda: forge(key="another-key-of-sufficient-length-for-hs256"), id="foreign"),
        pytest.param(lambda: forge({"aud": "someone-else"}), id="audience"),
        pytest.param(lambda: forge({"iss": "https://evil.example"}), id="issuer"),
        pytest.param(alg_none_token, id="alg-none"),
        pytest.param(lambda: forge()[:-4] + "AAAA", id="tampered-signature"),
        pytest.param(
            lambda: forge({"exp": datetime.now(UTC) - timedelta(seconds=1)}), id="expired"
        ),
        pytest.param(lambda: forge({"sub": "nobody"}), id="unknown-user"),
    ],
)
def test_tokens_that_must_not_pass_are_401(client, alice, token):
    response = client.get("/api/users/me", headers={"Authorization": f"Bearer {token()}"})

    assert response.status_code == 401
    assert set(response.json()) == {"message"}


def test_tampered_claims_do_not_pass(client, alice, engine):
    make_user(engine, "root", ["admin"])
    header, _body, signature = alice.token.split(".")
    forged_body = jwt.utils.base64url_encode(b'{"sub":"root"}').decode()

    response = client.get(
        "/api/users/me", headers={"Authorization": f"Bearer {header}.{forged_body}.{signature}"}
    )

    assert response.status_code == 401


def test_an_expired_token_says_so(client, alice):
    token = forge({"exp": datetime.now(UTC) - timedelta(minutes=1)})

    response = client.get("/api/users/me", headers={"Authorization": f"Bearer {token}"})

    assert response.json() == {"message": "the token has expired; get a new one"}


def test_an_inactive_user_is_403_everywhere(client, engine, alice):
    admin = make_user(engine, "admin", ["admin"])
    deactivated = client.patch(
        f"/api/users/{alice.id}", json={"status": "inactive"}, headers=admin.headers
    )
    assert deactivated.status_code == 200

    for method, path in [
        ("GET", "/api/users/me"),
        ("GET", "/api/reviews"),
        ("GET", "/api/connections"),
    ]:
        response = client.request(method, path, headers=alice.headers)
        assert response.status_code == 403
        assert response.json() == {"message": "your account is inactive; ask an administrator"}


def test_unknown_paths_answer_json_404(client):
    response = client.get("/api/nowhere")

    assert response.status_code == 404
    assert response.json() == {"message": "Not Found"}


def test_a_form_encoded_body_is_told_to_send_json(client, engine):
    admin = make_user(engine, "admin", ["admin"])

    response = client.post(
        "/api/connections",
        content=b'{"name":"pg","type":"database"}',
        headers={**admin.headers, "Content-Type": "application/x-www-form-urlencoded"},
    )

    assert response.status_code == 400
    assert response.json() == {
        "message": "send the request body as JSON with Content-Type: application/json"
    }


def test_sign_in_with_a_provider_is_off_in_local_mode(client):
    login = client.get("/api/login")
    callback = client.get("/api/callback", params={"code": "c", "state": "s"})

    assert login.status_code == 404
    assert "ACCESSGATE_AUTH=local" in login.json()["message"]
    assert callback.status_code == 404
