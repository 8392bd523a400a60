"""simgym-sql: a simgym plugin adding the ``sql`` domain, the sqlite3 shell over an
SQLite file. simgym finds it through the ``simgym.domains`` entry point
(``sql = "simgym_sql:SQL"``); nothing in simgym names it.

    import simgym
    env = simgym.make("sql", world_model="local")
"""

from simgym_sql.domain import SQL, SQLScenario

__all__ = ["SQL", "SQLScenario"]
