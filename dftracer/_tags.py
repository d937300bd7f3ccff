"""Contextual tags of Python events: the ``args`` of an event (epoch, step, image_idx,
image_size in bytes, and any user key), read from a decorated call's arguments or set with
``update()``. Values the core can write are bool/int/float/str; numpy scalars are unwrapped and
anything else is ``str()``-ed.
"""

from __future__ import annotations

import inspect

_KNOWN_TAGS = ("epoch", "step", "image_idx", "image_size")


def _tag_value(v):
    """A tag value the core can write: bool/int/float/str kept, numpy scalars unwrapped,
    anything else str()-ed."""
    if isinstance(v, (bool, int, float, str)):
        return v
    item = getattr(v, "item", None)
    if item is not None and getattr(v, "ndim", None) == 0:
        try:
            return item()
        except Exception:
            pass
    return str(v)


def _collect_tags(epoch=None, step=None, image_idx=None, image_size=None, args=None, tags=None):
    out = {}
    if epoch is not None:
        out["epoch"] = _tag_value(epoch)
    if step is not None:
        out["step"] = _tag_value(step)
    if image_idx is not None:
        out["image_idx"] = _tag_value(image_idx)
    if image_size is not None:
        out["image_size"] = _tag_value(image_size)
    if args:
        for k, v in args.items():
            if v is not None:
                out[str(k)] = _tag_value(v)
    if tags:
        for k, v in tags.items():
            if v is not None:
                out[str(k)] = _tag_value(v)
    return out


def _code_params(f):
    """(parameter names in positional order, defaults by name) of a Python function."""
    code = getattr(f, "__code__", None)
    if code is None:
        return (), {}
    n = code.co_argcount + code.co_kwonlyargcount
    names = code.co_varnames[:n]
    defaults = {}
    pos_defaults = getattr(f, "__defaults__", None) or ()
    if pos_defaults:
        pos_names = names[: code.co_argcount]
        for name, value in zip(pos_names[len(pos_names) - len(pos_defaults) :], pos_defaults):
            defaults[name] = value
    kw_defaults = getattr(f, "__kwdefaults__", None) or {}
    defaults.update(kw_defaults)
    return names, defaults


def _make_extractor(f, scan_self: bool):
    """A function (args, kwargs) -> dict of epoch/step/image_idx/image_size taken from the
    call's arguments (and from attributes of `self` for methods), or None when `f` has none."""
    names, defaults = _code_params(f)
    code = getattr(f, "__code__", None)
    n_pos = code.co_argcount if code is not None else 0
    # (position or -1 for keyword-only, name)
    wanted = [(i if i < n_pos else -1, n) for i, n in enumerate(names) if n in _KNOWN_TAGS]
    is_method = scan_self and bool(names) and names[0] == "self"
    # **kwargs functions: known tag names passed by keyword count too
    kw_only = (
        [n for n in _KNOWN_TAGS if n not in names]
        if code is not None and code.co_flags & inspect.CO_VARKEYWORDS
        else []
    )
    if not wanted and not is_method and not kw_only:
        return None

    def extract(a, k):
        out = {}
        try:
            if is_method and a:
                obj = a[0]
                for attr in _KNOWN_TAGS:
                    v = getattr(obj, attr, None)
                    if isinstance(v, (int, float)) and not isinstance(v, bool):
                        out[attr] = v
            for i, n in wanted:
                if 0 <= i < len(a):
                    v = a[i]
                elif n in k:
                    v = k[n]
                else:
                    v = defaults.get(n)
                if v is None:
                    continue
                out[n] = _known_tag(n, v)
            for n in kw_only:
                v = k.get(n)
                if v is not None:
                    out[n] = _known_tag(n, v)
        except Exception:
            pass
        return out

    return extract


def _known_tag(n, v):
    """epoch/step/image_idx as int, image_size (bytes) as int or float."""
    if n == "image_size":
        v = _tag_value(v)
        return v if isinstance(v, (int, float)) else float(v)
    return int(v)
