"""Symbolic dims: named symbols with ranges and the arithmetic that shapes need.

A dim is an ``int`` or a :class:`Dim`. ``Dim`` objects are immutable expression trees
(symbols, ``+``, ``*``, floor and ceil division, ``min``/``max``); the C library puts them in
canonical form when a graph is built, so ``S*2 - S`` and ``S`` are the same dim there. Symbols
are identified by name: every symbol called ``"S"`` in one graph is the same dim, and its range
is the intersection of the ranges given for it.
"""

import re

__all__ = ["Dim", "Symbol", "symbol", "ceildiv", "dim_min", "dim_max"]


def _check_dim_operand(value):
    if isinstance(value, Dim):
        return value
    if isinstance(value, bool):
        raise TypeError("a dim cannot be a bool")
    try:
        return int(value.__index__())
    except AttributeError:
        raise TypeError(f"a dim is an int or a stax symbol expression, not {type(value).__name__}")


def _make(op, a, b):
    a = _check_dim_operand(a)
    b = _check_dim_operand(b)
    if isinstance(a, int) and isinstance(b, int):
        if op == "add":
            return a + b
        if op == "mul":
            return a * b
        if op == "floordiv":
            return a // b
        if op == "ceildiv":
            return -(-a // b)
        if op == "min":
            return min(a, b)
        if op == "max":
            return max(a, b)
    if op == "add":
        if isinstance(b, int) and b == 0:
            return a
        if isinstance(a, int) and a == 0:
            return b
    if op == "mul":
        if isinstance(b, int) and b == 1:
            return a
        if isinstance(a, int) and a == 1:
            return b
        if (isinstance(a, int) and a == 0) or (isinstance(b, int) and b == 0):
            return 0
    if op in ("floordiv", "ceildiv") and isinstance(b, int):
        if b <= 0:
            raise ValueError(f"dim division by {b}: the divisor must be positive")
        if b == 1:
            return a
    return Dim(op, (a, b))


class Dim:
    """A symbolic dim expression. Build them from :func:`symbol` with ``+ - * //``,
    :func:`ceildiv`, :func:`dim_min` and :func:`dim_max`; use them anywhere a shape takes an
    int (placeholders, reshape, expand, slices)."""

    __slots__ = ("_op", "_args", "_hash")

    def __init__(self, op, args):
        self._op = op
        self._args = tuple(args)
        self._hash = None

    # -- arithmetic ----------------------------------------------------------------------
    def __add__(self, other):
        return _make("add", self, other)

    def __radd__(self, other):
        return _make("add", other, self)

    def __sub__(self, other):
        return _make("add", self, _make("mul", other, -1))

    def __rsub__(self, other):
        return _make("add", other, _make("mul", self, -1))

    def __mul__(self, other):
        return _make("mul", self, other)

    def __rmul__(self, other):
        return _make("mul", other, self)

    def __floordiv__(self, other):
        return _make("floordiv", self, other)

    def __rfloordiv__(self, other):
        return _make("floordiv", other, self)

    def __neg__(self):
        return _make("mul", self, -1)

    def __pos__(self):
        return self

    def __truediv__(self, other):
        raise TypeError("dims are integers: use // (floor) or stax.ceildiv(a, b)")

    __rtruediv__ = __truediv__

    def __bool__(self):
        raise TypeError(f"the truth value of the symbolic dim {self} is not known until run time")

    def __index__(self):
        raise TypeError(f"the symbolic dim {self} has no value until run time")

    # -- identity: canonical polynomial form (S*8 == 8*S, S + S == 2*S) ----------------------
    def _key(self):
        return _canonical(self)

    def __eq__(self, other):
        if not isinstance(other, Dim):
            return NotImplemented
        return self._key() == other._key()

    def __ne__(self, other):
        result = self.__eq__(other)
        return result if result is NotImplemented else not result

    def __hash__(self):
        if self._hash is None:
            self._hash = hash(self._key())
        return self._hash

    # -- C boundary ----------------------------------------------------------------------
    def _spec(self):
        """The nested-tuple form stax._C.Graph reads."""
        return (self._op, _spec(self._args[0]), _spec(self._args[1]))

    def symbols(self):
        """The symbols this expression uses, in first-use order."""
        found = []

        def walk(d):
            if isinstance(d, Symbol):
                if d not in found:
                    found.append(d)
            elif isinstance(d, Dim):
                for a in d._args:
                    walk(a)

        walk(self)
        return found

    def evaluate(self, **values):
        """The value under ``name=int`` bindings: ``(S*2 + 1).evaluate(S=3) == 7``."""
        return _evaluate(self, values)

    def __repr__(self):
        return _text(self, 0)

    __str__ = __repr__


class Symbol(Dim):
    """A named dim with a range ``[min, max]`` (``max=None``: unbounded). Equal by name."""

    __slots__ = ("name", "min", "max")

    def __init__(self, name, min=1, max=None):
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name):
            raise ValueError(f"bad symbol name {name!r}: use letters, digits, '_' and '.'")
        if min is None:
            min = 0
        min = int(min)
        if max is not None:
            max = int(max)
            if max < min:
                raise ValueError(f"symbol {name}: empty range [{min}, {max}]")
        if min < 0:
            raise ValueError(f"symbol {name}: a dim cannot be negative (min={min})")
        super().__init__("sym", (name,))
        self.name = name
        self.min = min
        self.max = max

    def _spec(self):
        return ("sym", self.name, self.min, self.max)

    def __repr__(self):
        return self.name

    def range_text(self):
        """The symbol and its range as text: "S in [1, 4096]"."""
        return f"{self.name} in [{self.min}, {'inf' if self.max is None else self.max}]"


def symbol(name, min=1, max=None):
    """A named symbolic dim: ``B = stax.symbol("B")``, ``S = stax.symbol("S", min=1,
    max=4096)``. The default range is ``[1, inf)``; ``min=0`` allows empty tensors."""
    return Symbol(name, min, max)


def ceildiv(a, b):
    """``ceil(a / b)`` for dims (b > 0)."""
    return _make("ceildiv", a, b)


def dim_min(a, b):
    """The smaller of two dims (ints or symbolic), as a dim expression."""
    return _make("min", a, b)


def dim_max(a, b):
    """The larger of two dims (ints or symbolic), as a dim expression."""
    return _make("max", a, b)


def _poly(d):
    """{monomial: coefficient}; a monomial is a sorted tuple of (atom key, power)."""
    if isinstance(d, int):
        return {(): d} if d else {}
    if isinstance(d, Symbol):
        return {((("sym", d.name), 1),): 1}
    a, b = d._args
    if d._op == "add":
        result = dict(_poly(a))
        for monomial, coefficient in _poly(b).items():
            result[monomial] = result.get(monomial, 0) + coefficient
        return {m: c for m, c in result.items() if c}
    if d._op == "mul":
        result = {}
        for ma, ca in _poly(a).items():
            for mb, cb in _poly(b).items():
                powers = dict(ma)
                for atom, power in mb:
                    powers[atom] = powers.get(atom, 0) + power
                monomial = tuple(sorted(powers.items()))
                result[monomial] = result.get(monomial, 0) + ca * cb
        return {m: c for m, c in result.items() if c}
    atom = (d._op, _canonical(a), _canonical(b))
    return {((atom, 1),): 1}


def _canonical(d):
    return tuple(sorted(_poly(d).items()))


def _spec(d):
    if isinstance(d, Dim):
        return d._spec()
    return int(d)


def as_dim(value, what="dim"):
    """An int or a Dim (strings name symbols with the default range)."""
    if isinstance(value, Dim):
        return value
    if isinstance(value, str):
        return Symbol(value)
    if isinstance(value, bool) or value is None:
        raise TypeError(f"{what}: expected an int or a stax symbol, got {value!r}")
    try:
        v = int(value.__index__())
    except AttributeError:
        raise TypeError(f"{what}: expected an int or a stax symbol, got {type(value).__name__}")
    if v < 0:
        raise ValueError(f"{what}: a dim cannot be negative ({v})")
    return v


def _evaluate(d, values):
    if isinstance(d, int):
        return d
    if isinstance(d, Symbol):
        if d.name not in values:
            raise KeyError(f"no value for symbol {d.name}")
        return int(values[d.name])
    a = _evaluate(d._args[0], values)
    b = _evaluate(d._args[1], values)
    return _make(d._op, a, b)


_PRECEDENCE = {"add": 1, "mul": 2}


def _text(d, parent):
    if isinstance(d, int):
        return str(d) if d >= 0 or parent == 0 else f"({d})"
    if isinstance(d, Symbol):
        return d.name
    op = d._op
    a, b = d._args
    if op == "add":
        if isinstance(b, Dim) and b._op == "mul" and isinstance(b._args[1], int) and b._args[1] == -1:
            text = f"{_text(a, 1)} - {_text(b._args[0], 2)}"
        elif isinstance(b, int) and b < 0:
            text = f"{_text(a, 1)} - {-b}"
        else:
            text = f"{_text(a, 1)} + {_text(b, 1)}"
        return f"({text})" if parent > 1 else text
    if op == "mul":
        return f"{_text(a, 2)}*{_text(b, 2)}"
    if op == "floordiv":
        return f"floor({_text(a, 0)}/{_text(b, 2)})"
    if op == "ceildiv":
        return f"ceil({_text(a, 0)}/{_text(b, 2)})"
    return f"{op}({_text(a, 0)}, {_text(b, 0)})"


# -- parsing the C library's printed dims ("2*B*S + 1", "floor((H + 1)/2) - 1", "S^2") ------

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_.]*)|(.))")


def parse_dim(text, symbols=None):
    """Parses the C library's printed form of a dim back into a Dim. ``symbols`` maps names to
    Symbol objects (with their ranges); unknown names become symbols with range [0, inf)."""
    symbols = symbols or {}
    tokens = []
    for number, name, char in _TOKEN.findall(text):
        if number:
            tokens.append(("num", int(number)))
        elif name:
            tokens.append(("name", name))
        elif char.strip():
            tokens.append(("op", char))
    pos = [0]

    def peek():
        return tokens[pos[0]] if pos[0] < len(tokens) else (None, None)

    def take(expected=None):
        tok = peek()
        if tok[0] is None or (expected is not None and tok[1] != expected):
            raise ValueError(f"cannot parse dim {text!r}")
        pos[0] += 1
        return tok

    def expr():
        value = term()
        while peek() in (("op", "+"), ("op", "-")):
            sign = take()[1]
            rhs = term()
            value = value + rhs if sign == "+" else value - rhs
        return value

    def term():
        value = unary()
        while peek() == ("op", "*"):
            take()
            value = value * unary()
        return value

    def unary():
        if peek() == ("op", "-"):
            take()
            return -unary()
        return power()

    def power():
        value = atom()
        if peek() == ("op", "^"):
            take()
            exponent = take()
            if exponent[0] != "num":
                raise ValueError(f"cannot parse dim {text!r}")
            result = 1
            for _ in range(exponent[1]):
                result = result * value
            value = result
        return value

    def atom():
        kind, value = take()
        if kind == "num":
            return value
        if kind == "op" and value == "(":
            inner = expr()
            take(")")
            return inner
        if kind == "name":
            if value in ("floor", "ceil") and peek() == ("op", "("):
                take("(")
                numerator = expr()
                take("/")
                denominator = unary()
                take(")")
                return _make("floordiv" if value == "floor" else "ceildiv", numerator, denominator)
            if value in ("min", "max") and peek() == ("op", "("):
                take("(")
                first = expr()
                take(",")
                second = expr()
                take(")")
                return _make(value, first, second)
            known = symbols.get(value)
            return known if known is not None else Symbol(value, 0, None)
        raise ValueError(f"cannot parse dim {text!r}")

    result = expr()
    if pos[0] != len(tokens):
        raise ValueError(f"cannot parse dim {text!r}")
    return result
