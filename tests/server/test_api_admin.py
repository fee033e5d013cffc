"""A tenant's admin manages its users and tokens over the API; members and other tenants cannot."""

from __future__ import annotations

from server_kit import Server


def test_an_admin_adds_a_user_issues_and_revokes_a_token(server: Server) -> None:
    admin = server.client(server.token("initech", admin=True))
    shown = admin.get("/tenant")
    assert shown.status_code == 200, shown.text
    assert shown.json()["name"] == "initech" and len(shown.json()["tokens"]) == 1
    user = admin.post("/tenant/users", json={"name": "milton", "role": "member"})
    assert user.status_code == 201, user.text
    issued = admin.post("/tenant/tokens", json={"user_id": user.json()["id"], "label": "laptop"})
    assert issued.status_code == 201, issued.text
    secret, token_id = issued.json()["secret"], issued.json()["token"]["id"]
    listed = admin.get("/tenant").json()
    assert secret not in str(listed) and token_id in {t["id"] for t in listed["tokens"]}

    member = server.client(secret)
    assert member.get("/sessions").status_code == 200
    assert member.get("/me").json()["role"] == "member"
    assert admin.get("/me").json()["role"] == "admin"
    assert member.get("/queue").json() == {"running": [], "queued": [], "workers": 2}
    for method, path, body in (
        ("GET", "/tenant", None),
        ("POST", "/tenant/users", {"name": "x"}),
        ("POST", "/tenant/tokens", {"user_id": user.json()["id"]}),
        ("DELETE", f"/tenant/tokens/{token_id}", None),
    ):
        refused = member.request(method, path, json=body)
        assert refused.status_code == 403, (method, path, refused.text)

    assert admin.delete(f"/tenant/tokens/{token_id}").status_code == 204
    assert member.get("/sessions").status_code == 401
    assert admin.delete(f"/tenant/tokens/{token_id}").status_code == 204  # Again: no change.


def test_an_admin_cannot_reach_another_tenants_users_or_tokens(server: Server) -> None:
    ours = server.client(server.token("umbrella", admin=True))
    theirs = server.client(server.token("aperture", admin=True))
    their_view = theirs.get("/tenant").json()
    their_user = their_view["users"][0]["id"]
    their_token = their_view["tokens"][0]["id"]
    stolen = ours.post("/tenant/tokens", json={"user_id": their_user})
    assert stolen.status_code == 404 and their_user in stolen.json()["error"]["message"]
    assert ours.delete(f"/tenant/tokens/{their_token}").status_code == 404
    assert theirs.get("/tenant").status_code == 200  # Their token still works.
    assert their_user not in ours.get("/tenant").text
