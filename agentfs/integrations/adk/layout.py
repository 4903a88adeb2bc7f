"""Where Google ADK's sessions, scoped state and artifacts live in a store (ids through run_names.segment).

    <prefix>/<app>/session/<user>/<session>    one run per session: each event one checkpoint
    <prefix>/<app>/app                         the app's `app:` state (keys without the prefix)
    <prefix>/<app>/user/<user>                 a user's `user:` state
    <prefix>/<app>/artifact/<user>/<session>/<filename>   one run per artifact: each version one checkpoint
    <prefix>/<app>/artifact/<user>/user/<filename>        a `user:` artifact (the session segment is `user`)

A session checkpoint's state is `{"event": {...}, "state": {...}}`: one event as ADK dumps it (JSON
mode, None fields left out) and the session-scoped state after it (an unchanged state is the parent's
value, referred to where it lies). A session's creation and a fork hold `{"events": [...], "state":
{...}}` instead: the whole list of its events then (empty at creation), as every checkpoint of the
earlier layout did. The events as of a checkpoint are those of the newest whole list on its line,
followed by the event of each checkpoint after it (events.py). Its metadata holds `last_update_time`
(so a listing reads no event) and the user and session ids whose segments are hashed (only the
earlier layout's checkpoints name the app, user and session, count the events and hold
`last_event_id`). Session segments are hashed when `user` could clash.
"""

from __future__ import annotations

from ..run_names import segment

PREFIX = "adk"
EVENTS = "events"  # the whole list: a creation, a fork, and every checkpoint of the earlier layout
EVENT = "event"  # one event: each append
STATE = "state"
USER_SCOPE = "user"  # the session segment of user-scoped artifacts


def session_run(prefix: str, app_name: str, user_id: str, session_id: str) -> str:
    return f"{sessions_root(prefix, app_name, user_id)}{segment(session_id)}"


def sessions_root(prefix: str, app_name: str, user_id: str | None = None) -> str:
    """The common start of the app's (or one user's) session runs."""
    root = f"{prefix}/{segment(app_name)}/session/"
    return root if user_id is None else f"{root}{segment(user_id)}/"


def app_state_run(prefix: str, app_name: str) -> str:
    return f"{prefix}/{segment(app_name)}/app"


def user_state_run(prefix: str, app_name: str, user_id: str) -> str:
    return f"{prefix}/{segment(app_name)}/user/{segment(user_id)}"


def artifacts_root(prefix: str, app_name: str, user_id: str, session_id: str | None) -> str:
    """The common start of the artifact runs of a session, or of the user's scope (session_id None)."""
    scope = USER_SCOPE if session_id is None else _session_segment(session_id)
    return f"{prefix}/{segment(app_name)}/artifact/{segment(user_id)}/{scope}/"


def _session_segment(session_id: str) -> str:
    """A session's segment among artifact scopes: never `user`, the user scope's own."""
    return segment(session_id) if session_id != USER_SCOPE else segment(" " + session_id)
