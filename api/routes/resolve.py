"""`GET /v1/artifacts/resolve?source=...`: propose an artifact from a Hugging Face model. Writes
nothing (no row, no workflow); only the Hub file cache under the plane's home grows. The proposals and
their cache: api/services/proposals.py."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, cast

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute

from api.auth import Viewer
from api.deps import proposals_of
from api.services.proposals import Answer
from wingsmith.domain.hub import ArtifactProposal

router = APIRouter(prefix="/v1/artifacts", tags=["artifacts"])


class _CachedAnswersFirst(APIRoute):
    """The resolve route, answering from the cache before FastAPI solves the route's dependency and
    query parameter: that machinery was a sixth of a cached resolve's time in the API, for one value
    read from the query string. The route's own dependency (`Viewer`) is called first, as FastAPI
    calls it first, so who may ask and the 401/403 they get are the route's; only then is the cache
    looked at. Anything but a cached answer (no `source`, an invalid one, one not cached) goes through
    the route as declared; with a `source`, that checks the token a second time (a dict lookup; for a
    sign-in token, a second signature check, beside a call to the Hub). A dependency added where this
    router is included would not be seen here: api/app.py includes it with none."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        declared = super().get_route_handler()
        # The route's one dependency, which takes the request; a second one fails here, as the route is
        # built, instead of being skipped.
        [dependency] = [d.call for d in self.dependant.dependencies]
        auth = cast(Callable[[Request], Awaitable[Any]], dependency)

        async def handler(request: Request) -> Response:
            source = request.query_params.get("source")  # the value FastAPI would pass (the last one)
            if source is not None:
                await auth(request)
                answer = proposals_of(request.app.state).cached_answer(source)
                if answer is not None:
                    return _respond(request, answer)
            return await declared(request)
        return handler


async def resolve(request: Request, _viewer: Viewer,
                  source: str = Query(..., description="hf:<org>/<name>[@<revision>], "
                                      "https://huggingface.co/<org>/<name>[/tree/<revision>] or <org>/<name>")):
    # The app's proposals by hand, not as a dependency: the route class above expects the route to have one.
    return _respond(request, await proposals_of(request.app.state).answer(source))


# `router.get` takes no route class; this is what it does, with one.
router.add_api_route("/resolve", resolve, methods=["GET"], response_model=ArtifactProposal,
                     summary="Propose an artifact from a Hugging Face model (writes nothing)",
                     route_class_override=_CachedAnswersFirst)


def _respond(request: Request, answer: Answer) -> Response:
    if "gzip" in request.headers.get("accept-encoding", ""):
        return Response(answer.gzipped, media_type="application/json",
                        headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"})
    return Response(answer.raw, media_type="application/json", headers={"Vary": "Accept-Encoding"})
