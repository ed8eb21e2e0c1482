"""The queue API's routes, one `APIRouter` per thing served; `create_app` includes them all."""
