"""factory-boy factories: defaults only; tests state what matters to their claim."""

from __future__ import annotations

import factory

from bus.models import Agent, Room


class RoomFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Room
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"room-{n}")


class AgentFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Agent
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"agent-{n}")
