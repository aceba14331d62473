"""Users: the admin's view and changes."""

import pytest

from tests.factories import make_user


def test_admins_list_users(client, engine, admin):
    make_user(engine, "bob", ["dba"])

    response = client.get("/api/users", headers=admin.headers)

    assert response.status_code == 200
    assert [user["sub"] for user in response.json()] == ["admin", "bob"]


def test_regular_users_cannot_list_or_change_users(client, engine, admin):
    bob = make_user(engine, "bob", ["dba"])

    assert client.get("/api/users", headers=bob.headers).status_code == 403
    response = client.patch(f"/api/users/{admin.id}", json={"groups": []}, headers=bob.headers)
    assert response.status_code == 403
    assert response.json() == {"message": "only administrators can do this"}


def test_admins_change_groups_status_and_chat_id(client, engine, admin):
    bob = make_user(engine, "bob", ["dba"])

    response = client.patch(
        f"/api/users/{bob.id}",
        json={"groups": ["sre", " dba ", "sre"], "chat_id": "U012ABCDEF", "status": "inactive"},
        headers=admin.headers,
    )

    assert response.status_code == 200
    body = response.json()
    assert body["groups"] == ["sre", "dba"]
    assert body["chat_id"] == "U012ABCDEF"
    assert body["status"] == "inactive"


def test_a_chat_id_belongs_to_one_user(client, engine, admin):
    bob = make_user(engine, "bob")
    carol = make_user(engine, "carol")
    client.patch(f"/api/users/{bob.id}", json={"chat_id": "U1"}, headers=admin.headers)

    response = client.patch(f"/api/users/{carol.id}", json={"chat_id": "U1"}, headers=admin.headers)

    assert response.status_code == 409
    assert response.json() == {"message": "that chat_id is already linked to another user"}


def test_admins_cannot_lock_themselves_out(client, admin):
    response = client.patch(
        f"/api/users/{admin.id}", json={"status": "inactive"}, headers=admin.headers
    )

    assert response.status_code == 400
    assert client.get("/api/users/me", headers=admin.headers).status_code == 200


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"status": "sleeping"}, "body.status"),
        ({"groups": ["has space"]}, "group names are 1 to 100 characters without spaces"),
        ({"groups": "admin"}, "body.groups"),
        ({"sub": "someone-else"}, "body.sub"),
    ],
)
def test_bad_changes_are_400(client, engine, admin, body, fragment):
    bob = make_user(engine, "bob", ["dba"])

    response = client.patch(f"/api/users/{bob.id}", json=body, headers=admin.headers)

    assert response.status_code == 400
    assert fragment in response.json()["message"]


def test_unknown_user_is_404(client, admin):
    response = client.patch(
        "/api/users/00000000-0000-0000-0000-000000000000", json={}, headers=admin.headers
    )

    assert response.status_code == 404
    assert response.json() == {"message": "user not found"}
