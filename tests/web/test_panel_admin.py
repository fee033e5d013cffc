"""The panel's Administration view in a real Chromium against a real `kestrel serve`: an admin adds
a member and issues them a token (its secret shown once), the member signs in with it and is
offered no administration, and the admin revokes the token, which sends the member back to sign-in.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from panel_kit import (
    NOT_AN_ADMIN,
    PHONE,
    Console,
    axe_violations,
    new_page,
    shots_folder,
    sign_in,
)
from playwright.sync_api import expect
from server_kit import BASH_THEN_DONE, Server, wait_for

REFUSED = "status of 401"
ONLY_ADMINS = "only an admin of the tenant may do this"


def test_an_admin_adds_a_member_issues_and_revokes_their_token(
    server: Server, browser: Any, tmp_path: Path
) -> None:
    admin_token = server.token("admin-panel", "pro", admin=True)
    client = server.client(admin_token)
    body = {"task": "make a file", "source": {"path": str(server.repo("admin-panel"))}}
    body["model"] = server.script(BASH_THEN_DONE, "admin-panel.json")
    sid = client.post("/sessions", json=body).json()["id"]
    wait_for(client, sid, lambda v: v["waiting_on"] == "approval")

    console = Console()
    page = new_page(browser, console)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    sign_in(page, server.url, admin_token)
    page.get_by_role("link", name="Administration").click()
    expect(page.get_by_role("heading", name="Administration")).to_be_visible()
    expect(page.get_by_role("link", name="Administration")).to_have_attribute(
        "aria-current", "page"
    )
    tenant = page.get_by_role("region", name="Tenant")
    expect(tenant.locator("[data-figure=name]")).to_have_text("admin-panel")
    expect(tenant.locator("[data-figure=plan]")).to_have_text("pro")
    queue = page.get_by_role("region", name="Queue")
    expect(queue.get_by_role("link", name="make a file")).to_have_attribute(
        "href", f"#/sessions/{sid}"
    )
    expect(queue.locator("[data-figure=workers]")).to_contain_text(f"{server.workers} workers")

    # Adding a user, from the keyboard: Enter in the name field sends the form.
    page.get_by_label("Name", exact=True).fill("Mia Member")
    page.keyboard.press("Enter")
    expect(
        page.get_by_role("status").filter(has_text="Added Mia Member as member.")
    ).to_be_visible()
    users = page.get_by_role("region", name="Users")
    expect(users.get_by_role("row", name=re.compile("Mia Member member"))).to_be_visible()

    page.get_by_label("For user").select_option(label="Mia Member (member)")
    page.get_by_label("Label (optional)").fill("laptop")
    page.get_by_role("button", name="Issue token").click()
    box = page.get_by_role("region", name="New token: copy it now")
    expect(box).to_contain_text("will not be shown again")
    secret = box.get_by_label("The new token").inner_text().strip()
    assert secret.startswith("ks_") and client.get("/tenant").status_code == 200
    expect(box.get_by_role("button", name="Copy")).to_be_focused()
    box.get_by_role("button", name="Copy").click()
    expect(box.get_by_role("status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == secret
    row = page.locator(".token-row", has_text="laptop")
    expect(row).to_contain_text("Mia Member")
    expect(row.locator(".badge")).to_have_text("active")
    assert page.content().count(secret) == 1  # In the box, nowhere else.
    assert admin_token not in page.content()  # Never a secret but the one just issued.
    page.screenshot(path=str(shots_folder(tmp_path) / "panel-admin.png"), full_page=True)
    assert axe_violations(page) == []
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert axe_violations(page) == []
    page.screenshot(path=str(shots_folder(tmp_path) / "panel-admin-phone.png"), full_page=True)

    # Leaving the view forgets the secret.
    page.get_by_role("link", name="All sessions").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    page.get_by_role("link", name="Administration").click()
    expect(page.locator(".token-row", has_text="laptop")).to_be_visible()
    assert secret not in page.content()

    # The member signs in with it: the sessions and no Administration; its address says why.
    member = new_page(browser, console)
    with member.expect_response(lambda r: r.url.endswith("/v1/me")) as probe:
        sign_in(member, server.url, secret)
    assert probe.value.status == 200 and probe.value.json()["role"] == "member"
    expect(member.get_by_role("link", name="make a file")).to_be_visible()
    expect(member.get_by_role("link", name="Administration")).to_be_hidden()
    member.goto(server.url + "/#/admin")
    expect(member.locator("#admin-body")).to_have_text(ONLY_ADMINS)
    expect(member.get_by_role("alert")).to_have_text(ONLY_ADMINS)
    assert member.locator("#admin-body form, #admin-body table, #admin-body li").count() == 0

    # Revoking asks first; Escape keeps the token.
    revoke = page.get_by_role("button", name='Revoke token "laptop" of Mia Member')
    revoke.click()
    dialog = page.get_by_role("dialog", name='Revoke token "laptop"?')
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Keep it")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(row.locator(".badge")).to_have_text("active")
    revoke.click()
    dialog.get_by_role("button", name="Revoke").click()
    expect(dialog).to_be_hidden()
    row = page.locator(".token-row", has_text="laptop")
    expect(row.locator(".badge")).to_have_text("revoked")
    expect(row).to_contain_text("Revoked")
    expect(row.get_by_role("button")).to_have_count(0)
    expect(page.get_by_role("status").filter(has_text="Revoked token laptop.")).to_be_visible()

    # The member's next step goes back to sign-in.
    member.get_by_role("link", name="All sessions").click()
    expect(member.get_by_role("heading", name="Sign in")).to_be_visible(timeout=10_000)
    expect(member.locator("#sign-in-error")).to_contain_text("refused your token")
    assert member.evaluate("sessionStorage.length") == 0
    assert console.unexpected(REFUSED, NOT_AN_ADMIN) == []
    member.context.close()
    page.context.close()
