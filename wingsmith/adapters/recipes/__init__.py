"""The recipe catalog on disk and upstream: the shipped catalog (`catalog.json`, with where it came from
in SOURCE.md), stored versions and the one in force (`files`), and fetching the upstream trees
(`refresh`). Parsing them is the domain's (wingsmith/domain/recipes/)."""
