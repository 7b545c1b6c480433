"""Configuration: the KEY=VALUE file, environment precedence, strict values,
the unknown-variable warning, and what DATABASE_URL / REDIS_URL / the SQLite default
really select. Parser rules are checked in-process; start-up behaviour is checked on
real `salon` processes, because that is where a user meets it."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from salon.config import (
    KNOWN,
    ConfigError,
    Settings,
    merged_environment,
    parse_config_text,
    read_config_file,
    warn_unknown,
)
from tests.support import REPO, run_salon, salon_env


def sqlite_env(tmp_path, **extra: str) -> dict[str, str]:
    """A real process's environment on the embedded default (SQLite file in tmp_path, no
    Redis), also in the PostgreSQL CI pass; `extra` may set the URLs explicitly."""
    return salon_env(tmp_path, **{"DATABASE_URL": "", "REDIS_URL": "", **extra})


# --- the file format, rule by rule ---------------------------------------------------


def test_blank_lines_are_skipped():
    assert parse_config_text("\n\n   \nAGENT_SALON_PORT=9400\n\t\n") == {"AGENT_SALON_PORT": "9400"}


def test_comment_lines_are_skipped_even_when_indented():
    text = "# the port\n   # AGENT_SALON_BIND=0.0.0.0\nAGENT_SALON_PORT=9400\n"
    assert parse_config_text(text) == {"AGENT_SALON_PORT": "9400"}


def test_a_hash_inside_a_value_is_part_of_the_value_not_a_comment():
    assert parse_config_text("AGENT_SALON_NAME=web#1 # not a comment") == {
        "AGENT_SALON_NAME": "web#1 # not a comment"
    }


def test_a_line_is_split_at_its_first_equals_sign():
    assert parse_config_text("DATABASE_URL=postgres://u@h/db?sslmode=require") == {
        "DATABASE_URL": "postgres://u@h/db?sslmode=require"
    }


def test_key_and_value_are_trimmed():
    assert parse_config_text("   AGENT_SALON_PORT   =   9400   ") == {"AGENT_SALON_PORT": "9400"}


def test_one_pair_of_surrounding_double_quotes_is_stripped():
    assert parse_config_text('AGENT_SALON_ROOM="team, ops"') == {"AGENT_SALON_ROOM": "team, ops"}


def test_quotes_are_stripped_after_trimming_and_keep_the_spaces_inside_them():
    assert parse_config_text('  AGENT_SALON_NAME =  " web "  ') == {"AGENT_SALON_NAME": " web "}


def test_only_one_pair_of_double_quotes_is_stripped():
    assert parse_config_text('AGENT_SALON_NAME=""web""') == {"AGENT_SALON_NAME": '"web"'}


def test_a_pair_of_double_quotes_around_nothing_gives_an_empty_value():
    assert parse_config_text('AGENT_SALON_ROOM=""') == {"AGENT_SALON_ROOM": ""}


@pytest.mark.parametrize("value", ['"web', 'web"', '"', 'we"b'])
def test_a_lone_double_quote_is_kept(value):
    assert parse_config_text(f"AGENT_SALON_NAME={value}") == {"AGENT_SALON_NAME": value}


def test_single_quotes_are_not_stripped():
    assert parse_config_text("AGENT_SALON_NAME='web'") == {"AGENT_SALON_NAME": "'web'"}


def test_a_line_without_an_equals_sign_is_skipped():
    text = "AGENT_SALON_PORT\nexport\nAGENT_SALON_BIND=127.0.0.1"
    assert parse_config_text(text) == {"AGENT_SALON_BIND": "127.0.0.1"}


@pytest.mark.parametrize("line", ["=9400", "   = 9400", "=", '  =""'])
def test_a_line_with_an_empty_key_is_skipped(line):
    assert parse_config_text(f"{line}\nAGENT_SALON_BIND=::1") == {"AGENT_SALON_BIND": "::1"}


def test_an_empty_value_is_kept_as_an_empty_value():
    assert parse_config_text("AGENT_SALON_ROOM=") == {"AGENT_SALON_ROOM": ""}


def test_a_later_line_wins_over_an_earlier_one():
    text = "AGENT_SALON_PORT=9400\nAGENT_SALON_PORT=9401\n"
    assert parse_config_text(text) == {"AGENT_SALON_PORT": "9401"}


def test_windows_line_endings_read_like_unix_ones():
    text = '# note\r\nAGENT_SALON_PORT=9400\r\n\r\nAGENT_SALON_ROOM="team"\r\n'
    assert parse_config_text(text) == {"AGENT_SALON_PORT": "9400", "AGENT_SALON_ROOM": "team"}


def test_a_byte_order_mark_does_not_hide_the_first_key(tmp_path):
    path = tmp_path / "salon.conf"
    path.write_bytes("AGENT_SALON_PORT=9400\n".encode("utf-8-sig"))
    assert read_config_file(str(path)) == {"AGENT_SALON_PORT": "9400"}


# --- where a value comes from ----------------------------------------------------------


def _conf(tmp_path, text: str) -> str:
    path = tmp_path / "salon.conf"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(path)


def test_the_environment_wins_over_the_file(tmp_path):
    conf = _conf(tmp_path, "AGENT_SALON_PORT=9400\n")
    merged = merged_environment({"AGENT_SALON_CONFIG": conf, "AGENT_SALON_PORT": "9500"})
    assert Settings(merged).port("AGENT_SALON_PORT") == 9500


def test_an_empty_environment_value_wins_over_the_file(tmp_path):
    conf = _conf(tmp_path, "AGENT_SALON_PORT=9400\nAGENT_SALON_ROOM=team\n")
    merged = merged_environment(
        {"AGENT_SALON_CONFIG": conf, "AGENT_SALON_PORT": "", "AGENT_SALON_ROOM": ""}
    )
    assert merged["AGENT_SALON_PORT"] == "" and merged["AGENT_SALON_ROOM"] == ""
    # Empty means "the default", not "whatever the file says".
    assert Settings(merged).port("AGENT_SALON_PORT") == 9315
    assert Settings(merged).items("AGENT_SALON_ROOM") == []


def test_the_file_fills_in_what_the_environment_does_not_set(tmp_path):
    conf = _conf(tmp_path, "AGENT_SALON_PORT=9400\nREDIS_URL=redis://127.0.0.1:6379/0\n")
    merged = merged_environment({"AGENT_SALON_CONFIG": conf, "AGENT_SALON_BIND": "::1"})
    assert merged["AGENT_SALON_PORT"] == "9400"
    assert merged["REDIS_URL"] == "redis://127.0.0.1:6379/0"
    assert merged["AGENT_SALON_BIND"] == "::1"


def test_without_agent_salon_config_no_file_is_read():
    assert merged_environment({"AGENT_SALON_PORT": "9400"}) == {"AGENT_SALON_PORT": "9400"}


def test_a_missing_config_file_is_refused_naming_the_variable_and_the_path(tmp_path):
    missing = tmp_path / "nowhere.conf"
    with pytest.raises(ConfigError) as refused:
        merged_environment({"AGENT_SALON_CONFIG": str(missing)})
    assert "AGENT_SALON_CONFIG" in str(refused.value)
    assert str(missing) in str(refused.value)


def test_a_config_path_that_is_a_directory_is_refused_clearly(tmp_path):
    with pytest.raises(ConfigError, match=r"AGENT_SALON_CONFIG.*cannot be read"):
        merged_environment({"AGENT_SALON_CONFIG": str(tmp_path)})


# --- strict values ---------------------------------------------------------------------


def test_unset_values_take_the_documented_defaults():
    cfg = Settings({})
    assert cfg.port("AGENT_SALON_PORT") == 9315
    assert cfg.text("AGENT_SALON_BIND") == "127.0.0.1"
    assert cfg.integer("AGENT_SALON_LONG_CHARS") == 1500
    assert cfg.integer("AGENT_SALON_INBOX_CHARS") == 1200
    assert cfg.flag("AGENT_SALON_REQUIRE_TOKENS") is False
    assert cfg.items("AGENT_SALON_ALLOWED_HOSTS") == ["localhost", "127.0.0.1", "::1"]
    assert cfg.text("AGENT_SALON_SESSION_IDLE") == "7d"
    assert cfg.text("AGENT_SALON_DEFAULT_ROOM") == "salon"
    assert cfg.optional_flag("AGENT_SALON_HEADLESS") is None


def test_an_empty_value_means_the_default_for_lists_too():
    cfg = Settings({"AGENT_SALON_ALLOWED_HOSTS": " ", "AGENT_SALON_ROOM": ""})
    assert cfg.items("AGENT_SALON_ALLOWED_HOSTS") == ["localhost", "127.0.0.1", "::1"]
    assert cfg.items("AGENT_SALON_ROOM") == []


def test_a_list_value_replaces_the_default_list():
    cfg = Settings({"AGENT_SALON_ALLOWED_HOSTS": "salon.internal, salon.internal:9315,"})
    assert cfg.items("AGENT_SALON_ALLOWED_HOSTS") == ["salon.internal", "salon.internal:9315"]


@pytest.mark.parametrize("value", ["abc", "93 15", "-1", "+9315", "9315.0", "٩٣١٥"])
def test_a_port_that_is_not_a_whole_number_is_refused_naming_the_variable(value):
    with pytest.raises(ConfigError, match=r"AGENT_SALON_PORT.*not a whole number"):
        Settings({"AGENT_SALON_PORT": value}).port("AGENT_SALON_PORT")


@pytest.mark.parametrize("value", ["0", "65536", "9" * 5000])
def test_a_port_out_of_range_is_refused_naming_the_variable(value):
    with pytest.raises(ConfigError, match=r"AGENT_SALON_PORT.*out of range"):
        Settings({"AGENT_SALON_PORT": value}).port("AGENT_SALON_PORT")


@pytest.mark.parametrize(("value", "expected"), [("1", True), ("yes", True), ("0", False)])
def test_a_flag_reads_one_and_zero_and_their_usual_spellings(value, expected):
    assert Settings({"AGENT_SALON_REQUIRE_TOKENS": value}).flag("AGENT_SALON_REQUIRE_TOKENS") is (
        expected
    )


def test_a_flag_that_is_neither_on_nor_off_is_refused_naming_the_variable():
    with pytest.raises(ConfigError, match="AGENT_SALON_REQUIRE_TOKENS='maybe' is not a flag"):
        Settings({"AGENT_SALON_REQUIRE_TOKENS": "maybe"}).flag("AGENT_SALON_REQUIRE_TOKENS")


def test_the_unknown_variable_warning_suggests_the_closest_known_name():
    stream = io.StringIO()
    warn_unknown({"AGENT_SALON_PROT": "1", "AGENT_SALON_PORT": "2", "PATH": "/bin"}, stream)
    assert stream.getvalue() == (
        "agent-salon: warning: unknown variable AGENT_SALON_PROT is ignored; "
        "did you mean AGENT_SALON_PORT?\n"
    )


def test_a_file_line_written_as_a_shell_export_is_named_as_unknown():
    stream = io.StringIO()
    warn_unknown(parse_config_text("export AGENT_SALON_PORT=9400"), stream)
    assert "unknown variable export AGENT_SALON_PORT" in stream.getvalue()
    assert "did you mean AGENT_SALON_PORT?" in stream.getvalue()


def test_every_documented_variable_is_known():
    spec_table = {
        "AGENT_SALON_PORT", "AGENT_SALON_BIND", "AGENT_SALON_DB", "AGENT_SALON_ALLOWED_HOSTS",
        "AGENT_SALON_ALIASES", "AGENT_SALON_CONFIG", "AGENT_SALON_SECRET", "AGENT_SALON_NAME",
        "AGENT_SALON_ROOM", "AGENT_SALON_LONG_CHARS", "AGENT_SALON_INBOX_CHARS",
        "AGENT_SALON_REQUIRE_TOKENS", "AGENT_SALON_SESSION_IDLE", "AGENT_SALON_DEFAULT_ROOM",
    }  # fmt: skip
    assert spec_table <= set(KNOWN)


def test_every_known_variable_is_in_the_readme_and_in_env_example():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    example = (REPO / ".env.example").read_text(encoding="utf-8")
    for name in [*KNOWN, "DATABASE_URL", "REDIS_URL"]:
        assert f"`{name}`" in readme, name
        assert f"{name}=" in example, name


# --- start-up of a real process --------------------------------------------------------


def _one_line_refusal(done: subprocess.CompletedProcess, variable: str) -> str:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert variable in lines[0]
    return lines[0]


def test_an_unknown_agent_salon_variable_is_named_in_a_warning_on_stderr(tmp_path):
    done = run_salon("check", env=sqlite_env(tmp_path, AGENT_SALON_PROT="1"))
    assert done.returncode == 0, done.stderr
    assert "unknown variable AGENT_SALON_PROT" in done.stderr
    assert "did you mean AGENT_SALON_PORT?" in done.stderr
    assert "AGENT_SALON_PROT" not in done.stdout


def test_an_unknown_variable_in_the_config_file_is_named_too(tmp_path):
    conf = _conf(tmp_path, "AGENT_SALON_INBOX_CHRS=800\n")
    done = run_salon("check", env=sqlite_env(tmp_path, AGENT_SALON_CONFIG=conf))
    assert done.returncode == 0, done.stderr
    assert "unknown variable AGENT_SALON_INBOX_CHRS" in done.stderr
    assert "did you mean AGENT_SALON_INBOX_CHARS?" in done.stderr


def test_a_malformed_port_stops_start_up_with_one_line_naming_the_variable(tmp_path):
    done = run_salon("check", env=sqlite_env(tmp_path, AGENT_SALON_PORT="93l5"))
    line = _one_line_refusal(done, "AGENT_SALON_PORT")
    assert "not a whole number" in line


def test_manage_py_refuses_a_malformed_port_the_same_way(tmp_path):
    done = subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "check"],
        env=sqlite_env(tmp_path, AGENT_SALON_PORT="http"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    _one_line_refusal(done, "AGENT_SALON_PORT")


def test_a_malformed_port_in_the_config_file_stops_start_up_too(tmp_path):
    conf = _conf(tmp_path, "AGENT_SALON_PORT=ninety\n")
    done = run_salon("check", env=sqlite_env(tmp_path, AGENT_SALON_CONFIG=conf))
    _one_line_refusal(done, "AGENT_SALON_PORT")


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("AGENT_SALON_BIND", "127.0.0.1:9315"),
        ("AGENT_SALON_LONG_CHARS", "0"),
        ("AGENT_SALON_INBOX_CHARS", "lots"),
        ("AGENT_SALON_REQUIRE_TOKENS", "maybe"),
        ("AGENT_SALON_SESSION_IDLE", "a week"),
        ("AGENT_SALON_ALIASES", "api=api-service"),
        ("AGENT_SALON_DEFAULT_ROOM", "the lobby"),
        ("AGENT_SALON_ROOM", "team,../etc"),
        ("AGENT_SALON_NAME", "web#1"),
        ("AGENT_SALON_HEADLESS", "sometimes"),
        ("DATABASE_URL", "postgress//localhost/salon"),
        ("REDIS_URL", "127.0.0.1:6379"),
    ],
)
def test_a_malformed_value_stops_start_up_naming_the_variable(tmp_path, variable, value):
    done = run_salon("check", env=sqlite_env(tmp_path, **{variable: value}))
    _one_line_refusal(done, variable)


def test_a_refused_database_url_does_not_echo_its_password(tmp_path):
    url = "mysqll://salon:hunter2@db.example/salon"
    done = run_salon("check", env=sqlite_env(tmp_path, DATABASE_URL=url))
    line = _one_line_refusal(done, "DATABASE_URL")
    assert "hunter2" not in line
    assert "salon:***@db.example" in line


def test_a_missing_config_file_stops_start_up_naming_it(tmp_path):
    missing = tmp_path / "nowhere.conf"
    done = run_salon("check", env=sqlite_env(tmp_path, AGENT_SALON_CONFIG=str(missing)))
    line = _one_line_refusal(done, "AGENT_SALON_CONFIG")
    assert str(missing) in line


def _settings(tmp_path, expression: str, **env: str):
    """Evaluate `expression` over django.conf.settings in a real `salon shell`."""
    code = f"import json; from django.conf import settings; print(json.dumps({expression}))"
    done = run_salon("shell", "--verbosity", "0", "-c", code, env=sqlite_env(tmp_path, **env))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_real_process_reads_the_config_file_under_the_environment(tmp_path):
    conf = _conf(
        tmp_path,
        """\
        # agent-salon
        AGENT_SALON_PORT = 9400
        AGENT_SALON_ROOM = "team,ops"
        AGENT_SALON_LONG_CHARS=2000
        """,
    )
    expr = "[settings.PORT, settings.AGENT_ROOMS, settings.LONG_CHARS]"
    assert _settings(tmp_path, expr, AGENT_SALON_CONFIG=conf) == [9400, ["team", "ops"], 2000]
    assert _settings(
        tmp_path, expr, AGENT_SALON_CONFIG=conf, AGENT_SALON_PORT="", AGENT_SALON_ROOM="x"
    ) == [9315, ["x"], 2000]


def test_the_embedded_default_is_sqlite_at_agent_salon_db_and_the_in_process_layer(tmp_path):
    db = tmp_path / "where" / "salon.db"
    db.parent.mkdir()
    got = _settings(
        tmp_path,
        "[settings.DATABASES['default']['ENGINE'], settings.DATABASES['default']['NAME'],"
        " settings.CHANNEL_LAYERS['default']['BACKEND']]",
        AGENT_SALON_DB=str(db),
    )
    assert got == [
        "salon.sqlite",
        str(db.resolve()),
        "patches.channels.SweepingInMemoryChannelLayer",
    ]


def test_database_url_selects_postgresql_and_ignores_agent_salon_db(tmp_path):
    got = _settings(
        tmp_path,
        "settings.DATABASES['default']",
        DATABASE_URL="postgres://salon:pw@db.internal:5433/salon",
    )
    assert got["ENGINE"] == "django.db.backends.postgresql"
    assert (got["HOST"], got["PORT"], got["NAME"], got["USER"]) == (
        "db.internal",
        5433,
        "salon",
        "salon",
    )


def test_with_database_url_the_secret_lives_in_one_place_whatever_the_working_directory(
    tmp_path,
):
    """Two processes on one PostgreSQL, started in different directories, must sign with
    the same generated secret (else each reads the other's entries as tampered)."""
    env = sqlite_env(
        tmp_path,
        DATABASE_URL="postgres://salon@db.internal/salon",
        XDG_DATA_HOME=str(tmp_path / "xdg"),
    )
    del env["AGENT_SALON_DB"]  # the default: no SQLite path that could name a place
    secrets = []
    for here in ("project-a", "project-b"):
        (tmp_path / here).mkdir()
        done = run_salon(
            "shell",
            "--verbosity",
            "0",
            "-c",
            "from django.conf import settings; print(settings.DATA_DIR, settings.SALON_SECRET)",
            env=env,
            cwd=tmp_path / here,
        )
        assert done.returncode == 0, done.stderr
        secrets.append(done.stdout.split())
    assert secrets[0] == secrets[1]
    assert secrets[0][0] == str(tmp_path / "xdg" / "agent-salon")


def test_redis_url_selects_the_channels_redis_layer_with_reads_longer_than_its_pops(tmp_path):
    """channels_redis blocks 5 s in a pop: a socket timeout of 5 s (redis-py 8's default)
    cut those waits, so every host gets a longer one."""
    got = _settings(
        tmp_path,
        "[settings.CHANNEL_LAYERS['default'], settings.STORE_FINGERPRINT]",
        REDIS_URL="redis://127.0.0.1:6379/3",
    )
    layer, store = got
    assert layer == {
        "BACKEND": "patches.channels_redis.CancelSafeRedisChannelLayer",
        "CONFIG": {
            "hosts": [
                {
                    "address": "redis://127.0.0.1:6379/3",
                    "socket_timeout": 30,
                    "socket_connect_timeout": 5,
                }
            ],
            "prefix": f"salon.{store}",
        },
    }


@pytest.fixture
def migrated(tmp_path) -> dict[str, str]:
    """A SQLite file that a real `salon migrate` created."""
    env = sqlite_env(tmp_path)
    done = run_salon("migrate", "--verbosity", "0", env=env)
    assert done.returncode == 0, done.stderr
    return env


def test_migrate_leaves_the_sqlite_file_in_wal_mode(migrated):
    # Opened with plain sqlite3: the mode is in the file, not just in Django's connection.
    with sqlite3.connect(migrated["AGENT_SALON_DB"]) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def _in_salon_shell(env: dict[str, str], code: str) -> str:
    done = run_salon("shell", "--verbosity", "0", "-c", textwrap.dedent(code), env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_sqlite_connection_waits_twenty_seconds_for_a_busy_database(migrated):
    out = _in_salon_shell(
        migrated,
        """
        from django.db import connection
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout")
            print(cursor.fetchone()[0])
        """,
    )
    assert out == "20000"


def test_a_transaction_takes_the_sqlite_write_lock_when_it_begins(migrated):
    # IMMEDIATE: a second writer is shut out from BEGIN on, before any write, so two
    # writers queue on busy_timeout instead of failing on a read-to-write upgrade.
    out = _in_salon_shell(
        migrated,
        """
        import sqlite3
        from django.conf import settings
        from django.db import transaction
        with transaction.atomic():
            other = sqlite3.connect(settings.DATABASES["default"]["NAME"], timeout=0)
            try:
                other.execute("BEGIN IMMEDIATE")
                print("free")
            except sqlite3.OperationalError as exc:
                print(exc)
        """,
    )
    assert out == "database is locked"


def _secret_probe(env: dict[str, str]) -> subprocess.Popen:
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'salon.settings'; "
        "django.setup(); from django.conf import settings; print(settings.SALON_SECRET)"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True
    )


def test_processes_starting_at_once_on_a_new_store_agree_on_one_secret_and_one_set_of_tables(
    tmp_path,
):
    (tmp_path / "data").mkdir()
    env = sqlite_env(tmp_path, AGENT_SALON_DB=str(tmp_path / "data" / "salon.db"))
    firsts = [
        subprocess.Popen(
            [sys.executable, "-m", "salon.cli", "rooms", "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(6)
    ]
    answers = [first.communicate(timeout=120) for first in firsts]

    assert [first.returncode for first in firsts] == [0] * 6, [err for _, err in answers]
    assert {json.loads(out)[0]["room"] for out, _ in answers} == {"salon"}
    secret = (tmp_path / "data" / ".agent-salon-secret").read_text().strip()
    assert len(secret) == 64 and _secret_probe(env).communicate(timeout=60)[0].strip() == secret
    # No half-written drafts left behind, and the secret is private.
    assert not [p.name for p in (tmp_path / "data").iterdir() if ".agent-salon-secret." in p.name]
    assert (tmp_path / "data" / ".agent-salon-secret").stat().st_mode & 0o777 == 0o600


def test_a_given_agent_salon_secret_is_used_and_nothing_is_generated(tmp_path):
    (tmp_path / "data").mkdir()
    env = sqlite_env(tmp_path, AGENT_SALON_DB=str(tmp_path / "data" / "salon.db"))
    env["AGENT_SALON_SECRET"] = "correct horse battery staple"
    probe = _secret_probe(env)
    assert probe.communicate(timeout=60)[0].strip() == "correct horse battery staple"
    assert not (tmp_path / "data" / ".agent-salon-secret").exists()


@pytest.mark.parametrize("xdg", [None, "", "/srv/data", "relative/data"])
def test_the_data_directory_on_linux_is_where_platformdirs_puts_it(xdg, monkeypatch, tmp_path):
    """salon.store writes platformdirs' Linux rule out (importing platformdirs cost every
    served command ~7 ms): both name the same directory, whatever XDG_DATA_HOME says."""
    import platformdirs

    from salon import store

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setenv("HOME", str(tmp_path))
    if xdg is None:
        monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_DATA_HOME", xdg)

    assert Path(store.default_data_dir()) == Path(
        platformdirs.user_data_dir("agent-salon", appauthor=False)
    )
