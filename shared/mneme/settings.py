"""Settings, validated once from the environment (prefix MNEME_). Domain code never reads os.environ."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class SqliteStore(BaseModel):
    kind: Literal["sqlite"] = "sqlite"


class DynamoStore(BaseModel):
    kind: Literal["dynamodb"]
    table_name: str
    region: str | None = None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MNEME_", env_nested_delimiter="__", extra="ignore")

    home: Path = Path(".mneme")
    store: Annotated[SqliteStore | DynamoStore, Field(discriminator="kind")] = SqliteStore()

    @property
    def sqlite_path(self) -> Path:
        return self.home / "mneme.db"


@cache
def get_settings() -> Settings:
    return Settings()
