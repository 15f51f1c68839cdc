"""PoolTable: a catalog's pools as one array of sizes, read as VariantPool values."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from domains import Catalog, PoolTable, VariantPool


def test_a_table_reads_as_the_tuple_of_pools_it_replaces() -> None:
    pools = (VariantPool(3), VariantPool(2, ({"q": 1}, {"q": 2})), VariantPool(7))
    table = PoolTable.of(pools)
    assert len(table) == 3 and table.sizes.tolist() == [3, 2, 7]
    assert table == pools and list(table) == list(pools)
    assert table[1].items == ({"q": 1}, {"q": 2}) and table[0].items is None
    assert table[-1] == VariantPool(7) and table[1:] == pools[1:]
    with pytest.raises(IndexError):
        table[3]
    assert PoolTable.of(table) is table
    assert pickle.loads(pickle.dumps(table)) == pools
    with pytest.raises(ValueError):
        table.sizes[0] = 1  # read-only, like the catalog's arrays


def test_a_catalog_takes_a_tuple_or_a_table_and_keeps_a_table() -> None:
    base = Catalog.synthetic(1, 4, 1)
    assert isinstance(base.pools, PoolTable) and base.pool_size.tolist() == [16] * 4
    pools = (VariantPool(2), *(VariantPool(10_000) for _ in range(3)))
    cat = dataclasses.replace(base, pools=pools)
    assert isinstance(cat.pools, PoolTable)
    assert cat.pool_size.tolist() == [2, 10_000, 10_000, 10_000]
    assert cat.fingerprint != base.fingerprint
    np.testing.assert_array_equal(cat.probe_size, base.probe_size)


def test_a_large_synthetic_catalog_holds_no_pool_objects() -> None:
    cat = Catalog.synthetic(100, 250, 4)
    assert cat.n_arms == 100_000
    assert isinstance(cat.pools, PoolTable) and cat.pools.items == {}
    assert cat.variant(99_999, 3) is None
