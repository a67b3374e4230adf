"""Every string of a JSON value by its path, and a value set at a path: what the forging fuzz tests share."""


def string_paths(value, path=()):
    if isinstance(value, str):
        yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from string_paths(item, path + (key,))
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield from string_paths(item, path + (number,))


def set_at(value, path, new):
    for key in path[:-1]:
        value = value[key]
    value[path[-1]] = new
