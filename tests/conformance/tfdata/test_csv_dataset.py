"""tf.data's ``CsvDataset`` kernel tests (``experimental/kernel_tests/csv_dataset_test.py``).

datapipe's ``CsvDataset`` names columns from a header row and yields a dict per row
(D-TF-24): each file here gets the header ``c0,c1,...`` before the upstream rows, unless
the upstream test has its own header, and a row is compared as the tuple of its values.
``record_defaults`` become ``column_types``; a default that fills a missing value is a
``map`` after ``nulls_as_nan`` (D-TF-24). Parse rules are pyarrow's (D-TF-25).
"""

from __future__ import annotations

import gzip
import os
import zlib

import numpy as np
import pyarrow.csv as pacsv
import pytest

import datapipe as dp

from ._support import VERIFY_FNS, assert_error, assert_produces, verify_checkpoint


def _setup_files(tmp_path, inputs, linebreak="\n", compression_type=None, header=True):
    """Upstream ``_setup_files`` (one file per list of rows), with a header row ``c0,...``
    (as many names as the first row has fields: D-TF-24) unless ``header=False``. A GZIP
    file is named ``.csv.gz``: pyarrow picks the codec from the name (D-TF-24)."""
    filenames = []
    for i, file_rows in enumerate(inputs):
        suffix = ".csv.gz" if compression_type == "GZIP" else ".csv"
        fn = os.path.join(tmp_path, f"temp_{i}{suffix}")
        rows = list(file_rows)
        if header:
            rows.insert(0, ",".join(f"c{j}" for j in range(_num_fields(inputs))))
        contents = linebreak.join(rows).encode("utf-8")
        if compression_type == "GZIP":
            contents = gzip.compress(contents)
        elif compression_type == "ZLIB":
            contents = zlib.compress(contents)
        with open(fn, "wb") as f:
            f.write(contents)
        filenames.append(fn)
    return filenames


def _num_fields(inputs):
    """The fields of the first non-empty row without a line break inside a quote."""
    return next(len(r.split(",")) for rows in inputs for r in rows if r and "\n" not in r)


def _types(*dtypes):
    """``record_defaults`` as ``column_types``: ``[0]`` is int32, ``[0.0]`` and ``[]``
    float32, ``['']`` string (tf.data's types for those literals)."""
    return {f"c{i}": t for i, t in enumerate(dtypes)}


def _rows(ds):
    return ds.map(lambda row: tuple(row.values()))


def _filled(defaults, dtype):
    """A row's missing values (NaN, read with ``nulls_as_nan``; ``''`` for text) replaced
    by ``defaults``, as ``record_defaults`` fill them (D-TF-24)."""

    def fill(row):
        out = []
        for v, d in zip(row.values(), defaults):
            if isinstance(v, str):
                out.append(v or d)
            else:
                out.append(dtype(d) if np.isnan(v) else dtype(v))
        return tuple(out)

    return fill


def _csv(filenames, **kwargs):
    return _rows(dp.CsvDataset(filenames, **kwargs))


def _i32(*rows):
    return [tuple(np.int32(v) for v in r) for r in rows]


def _f32(*rows):
    return [tuple(np.float32(v) for v in r) for r in rows]


def test_required_fields(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testRequiredFields."""
    files = _setup_files(tmp_path, [["1,2,3,4"]])
    assert_produces(_csv(files, column_types=_types(*["float32"] * 4)), _f32((1, 2, 3, 4)))


def test_int(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testInt."""
    files = _setup_files(tmp_path, [["1,2,3,4", "5,6,7,8"]])
    assert_produces(
        _csv(files, column_types=_types(*["int32"] * 4)), _i32((1, 2, 3, 4), (5, 6, 7, 8))
    )


def test_float(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testFloat."""
    files = _setup_files(tmp_path, [["1.0,2.1,3.2,4.3", "5.4,6.5,7.6,8.7"]])
    assert_produces(
        _csv(files, column_types=_types(*["float32"] * 4)),
        _f32((1.0, 2.1, 3.2, 4.3), (5.4, 6.5, 7.6, 8.7)),
    )


def test_string(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testString."""
    files = _setup_files(tmp_path, [["1.0,2.1,hello,4.3", "5.4,6.5,goodbye,8.7"]])
    assert_produces(
        _csv(files, column_types=_types(*["string"] * 4)),
        [("1.0", "2.1", "hello", "4.3"), ("5.4", "6.5", "goodbye", "8.7")],
    )


def test_with_empty_fields(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithEmptyFields,
    CsvDatasetTest.testWithScalarDefaults (an empty field is a null: without a fill it is a
    ``NullValueError``; the defaults are a ``map``: D-TF-24)."""
    files = _setup_files(tmp_path, [[",,,", "1,1,1,", ",2,2,2"]])
    assert_error(_csv(files, column_types=_types(*["int32"] * 4)), dp.PipelineError, "null")
    ds = dp.CsvDataset(files, column_types=_types(*["float32"] * 4), nulls_as_nan=True)
    assert_produces(
        ds.map(_filled([0] * 4, np.int32)), _i32((0, 0, 0, 0), (1, 1, 1, 0), (0, 2, 2, 2))
    )


def test_err_with_unquoted_quotes(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testErrWithUnquotedQuotes
    (pyarrow keeps a quote inside an unquoted field: D-TF-25)."""
    files = _setup_files(tmp_path, [['1,2"3,4']])
    assert_produces(_csv(files, column_types=_types(*["string"] * 3)), [("1", '2"3', "4")])


def test_err_with_unescaped_quotes(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testErrWithUnescapedQuotes
    (pyarrow reads on past the stray quote: D-TF-25)."""
    files = _setup_files(tmp_path, [['"a"b","c","d"']])
    assert_produces(_csv(files), [('ab"', "c", "d")])


@pytest.mark.parametrize(
    "rows",
    [
        ['1,"2"3",4', '1,"2"3",4",5,5', 'a,b,"c"d"', "e,f,g"],
        ['1,2"3,4', 'a,b,c"d', '9,8"7,6,5', "e,f,g"],
    ],
    ids=["unescaped", "unquoted"],
)
def test_ignore_err_with_quotes(tmp_path, rows):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testIgnoreErrWithUnescapedQuotes,
    CsvDatasetTest.testIgnoreErrWithUnquotedQuotes (a file is one unit, parsed when the
    dataset is built if its first block holds the bad record: the error names the record,
    and there is no record to skip: D-TF-24)."""
    files = _setup_files(tmp_path, [rows])
    with pytest.raises(dp.FileReadError, match="Expected 3 columns, got [45]: "):
        dp.CsvDataset(files, column_types=_types(*["string"] * 3))


def test_with_no_quote_delim_and_unquoted_quotes(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithNoQuoteDelimAndUnquotedQuotes
    (``use_quote_delim=False`` is pyarrow's ``quote_char=False``)."""
    files = _setup_files(tmp_path, [['1,2"3,4']])
    no_quotes = pacsv.ParseOptions(quote_char=False)
    ds = _csv(files, parse_options=no_quotes, column_types=_types(*["string"] * 3))
    assert_produces(ds, [("1", '2"3', "4")])


def test_mixed_types(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testMixedTypes."""
    files = _setup_files(tmp_path, [["1,2.1,3.2,4.3", "5,6.5,7.6,8.7"]])
    ds = _csv(files, column_types=_types("int32", "float32", "string", "float64"))
    assert_produces(
        ds,
        [
            (np.int32(1), np.float32(2.1), "3.2", np.float64(4.3)),
            (np.int32(5), np.float32(6.5), "7.6", np.float64(8.7)),
        ],
    )


def test_with_use_quote_delim_false(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithUseQuoteDelimFalse."""
    files = _setup_files(tmp_path, [['1,2,"3,4"', '"5,6",7,8']])
    ds = _csv(
        files,
        parse_options=pacsv.ParseOptions(quote_char=False),
        column_types=_types(*["string"] * 4),
    )
    assert_produces(ds, [("1", "2", '"3', '4"'), ('"5', '6"', "7", "8")])


def test_with_field_delim(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithFieldDelim."""
    files = _setup_files(tmp_path, [["c0:c1:c2:c3", "1:2:3:4", "5:6:7:8"]], header=False)
    ds = _csv(files, delimiter=":", column_types=_types(*["int32"] * 4))
    assert_produces(ds, _i32((1, 2, 3, 4), (5, 6, 7, 8)))


def test_with_na_value(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithNaValue
    (``na_value`` is pyarrow's ``null_values``; the default fills them: D-TF-24)."""
    files = _setup_files(tmp_path, [["1,NA,3,4", "NA,6,7,8"]])
    ds = dp.CsvDataset(
        files,
        convert_options=pacsv.ConvertOptions(null_values=["NA"]),
        column_types=_types(*["float32"] * 4),
        nulls_as_nan=True,
    )
    assert_produces(ds.map(_filled([0] * 4, np.int32)), _i32((1, 0, 3, 4), (0, 6, 7, 8)))


def test_with_select_cols(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithSelectCols
    (``select_cols=[1, 2]`` is ``columns=`` by name)."""
    files = _setup_files(tmp_path, [["1,2,3,4", '"5","6","7","8"']])
    ds = _csv(files, columns=["c1", "c2"], column_types=_types("string", "string", "string"))
    assert_produces(ds, [("2", "3"), ("6", "7")])


def test_with_select_cols_too_high(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithSelectColsTooHigh."""
    files = _setup_files(tmp_path, [["1,2,3,4", "5,6,7,8"]])
    with pytest.raises(dp.SchemaMismatchError, match="'c4' is missing"):
        dp.CsvDataset(files, columns=["c3", "c4"])


def test_with_one_col(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithOneCol
    (pyarrow skips a blank line unless ``ignore_empty_lines=False``: D-TF-25)."""
    files = _setup_files(tmp_path, [["0", "", "2"]])
    types = _types("string")
    assert_produces(_csv(files, column_types=types), [("0",), ("2",)])
    keep = pacsv.ParseOptions(ignore_empty_lines=False)
    ds = dp.CsvDataset(files, parse_options=keep, column_types=types)
    assert_produces(ds.map(_filled(["NA"], str)), [("0",), ("NA",), ("2",)])


def test_with_multiple_files(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithMultipleFiles."""
    files = _setup_files(tmp_path, [["1,2,3,4", "5,6,7,8"], ["5,6,7,8"]])
    ds = _csv(files, column_types=_types(*["int32"] * 4))
    assert_produces(ds, _i32((1, 2, 3, 4), (5, 6, 7, 8), (5, 6, 7, 8)))


def test_with_leading_and_trailing_spaces(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithLeadingAndTrailingSpaces."""
    files = _setup_files(tmp_path, [["0, 1, 2, 3"]])
    assert_produces(_csv(files, column_types=_types(*["float32"] * 4)), _f32((0.0, 1.0, 2.0, 3.0)))


def test_error_with_missing_default(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testErrorWithMissingDefault
    (a required field missing is a null that has no numpy form)."""
    files = _setup_files(tmp_path, [["0,"]])
    ds = _csv(files, column_types=_types("float32", "float32"))
    err = assert_error(ds, dp.PipelineError)
    assert isinstance(err.__cause__, dp.NullValueError), err
    assert "column 'c1' holds 1 null value(s), the first at row 0" in str(err.__cause__)


@pytest.mark.parametrize("num_defaults", [2, 5], ids=["fewer", "more"])
def test_error_with_defaults_other_than_fields(tmp_path, num_defaults):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testErrorWithFewerDefaultsThanFields,
    CsvDatasetTest.testErrorWithMoreDefaultsThanFields (the header names the fields)."""
    header = ",".join(f"c{i}" for i in range(num_defaults))
    files = _setup_files(tmp_path, [[header, "0,1,2,3"]], header=False)
    with pytest.raises(dp.FileReadError, match=f"Expected {num_defaults} columns, got 4"):
        dp.CsvDataset(files, column_types=_types(*["float32"] * num_defaults))


def test_with_header(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithHeader."""
    files = _setup_files(tmp_path, [["col1,col2", "1,2"]], header=False)
    ds = dp.CsvDataset(files, column_types={"col1": "int32", "col2": "int32"})
    assert_produces(ds, [{"col1": np.int32(1), "col2": np.int32(2)}])


def test_with_header_and_no_records(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithHeaderAndNoRecords
    (pyarrow needs the header's line break to see a header alone: D-TF-25)."""
    files = _setup_files(tmp_path, [["col1,col2", ""]], header=False)
    assert_produces(dp.CsvDataset(files, column_types={"col1": "int32", "col2": "int32"}), [])


def test_error_with_header_empty_file(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testErrorWithHeaderEmptyFile,
    CsvDatasetTest.testWithEmptyFile (datapipe's files always have a header: D-TF-24)."""
    files = _setup_files(tmp_path, [[]], header=False)
    with pytest.raises(dp.FileReadError, match="Empty CSV file"):
        dp.CsvDataset(files)


def test_error_with_empty_record(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testErrorWithEmptyRecord
    (a blank line is skipped unless ``ignore_empty_lines=False``: D-TF-25)."""
    files = _setup_files(tmp_path, [["", "1,2"]])
    assert_produces(_csv(files, column_types=_types("string", "string")), [("1", "2")])
    keep = pacsv.ParseOptions(ignore_empty_lines=False)
    assert_error(
        _csv(files, parse_options=keep, column_types=_types("int32", "int32")),
        dp.PipelineError,
        "null",
    )


def test_with_chained_ops(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithChainedOps:
    one dataset makes the iterators of ``repeat`` (the defaults are a ``map``: D-TF-24)."""
    files = _setup_files(tmp_path, [["1,,3,4", "5,6,,8"]])
    ds = dp.CsvDataset(files, column_types=_types(*["float32"] * 4), nulls_as_nan=True)
    ds = ds.map(_filled([0] * 4, np.int32)).repeat(5).prefetch(1)
    assert_produces(ds, _i32((1, 0, 3, 4), (5, 6, 0, 8)) * 5)


def test_with_type_defaults(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithTypeDefaults
    (a dtype or a default's type as the column's type)."""
    files = _setup_files(tmp_path, [["1.0,2.0", "3.0,4.0"]])
    ds = _csv(files, column_types=_types(np.float32, "float32"))
    assert_produces(ds, _f32((1.0, 2.0), (3.0, 4.0)))


def test_with_quoted(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithQuoted."""
    files = _setup_files(tmp_path, [['"a","b","c :)","d"', '"e","f","g :(","h"']])
    assert_produces(_csv(files), [("a", "b", "c :)", "d"), ("e", "f", "g :(", "h")])


def test_with_one_col_and_quotes(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithOneColAndQuotes."""
    files = _setup_files(tmp_path, [['"0"', '"1"', '"2"']])
    assert_produces(_csv(files, column_types=_types("string")), [("0",), ("1",), ("2",)])


def test_with_new_line(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithNewLine."""
    files = _setup_files(tmp_path, [['a,b,"""c""\n0","d\ne"', "f,g,h,i"]])
    assert_produces(_csv(files), [("a", "b", '"c"\n0', "d\ne"), ("f", "g", "h", "i")])


def test_with_new_line_in_unselected_col(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithNewLineInUnselectedCol."""
    files = _setup_files(tmp_path, [['1,"2\n3",4', "5,6,7"]])
    assert_produces(_csv(files, columns=["c0"], column_types=_types("string")), [("1",), ("5",)])


def test_with_exclude_col(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithExcludeCol
    (``exclude_cols=[1, 2]`` is ``columns=`` naming the others)."""
    files = _setup_files(tmp_path, [["1,2,3", "5,6,7"]])
    assert_produces(_csv(files, columns=["c0"], column_types=_types("string")), [("1",), ("5",)])


def test_with_exclude_col_and_record_defaults_too_high(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithExcludeColandRecordDefaultsTooHigh
    (three types for the two columns left: one names a column the file has not)."""
    files = _setup_files(tmp_path, [["1,2,3", "5,6,7"]])
    types = {"c1": "string", "c2": "string", "c3": "string"}
    with pytest.raises(dp.SchemaMismatchError, match=r"column_types names columns .*\['c3'\]"):
        dp.CsvDataset(files, columns=["c1", "c2"], column_types=types)


def test_with_exclude_col_and_record_defaults_too_low(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithExcludeColandRecordDefaultsTooLow
    (a column without a type is inferred, not an error: D-TF-24)."""
    files = _setup_files(tmp_path, [["1,2,3", "5,6,7"]])
    ds = _csv(files, columns=["c1", "c2"], column_types={"c1": "string"})
    assert_produces(ds, [("2", np.int64(3)), ("6", np.int64(7))])


def test_with_multiple_new_lines(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithMultipleNewLines."""
    files = _setup_files(tmp_path, [['a,"b\n\nx","""c""\n \n0","d\ne"', "f,g,h,i"]])
    assert_produces(_csv(files), [("a", "b\n\nx", '"c"\n \n0', "d\ne"), ("f", "g", "h", "i")])


def test_error_with_terminate_mid_record(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testErrorWithTerminateMidRecord
    (pyarrow ends an unclosed quoted field at the end of the file: D-TF-25)."""
    files = _setup_files(tmp_path, [['a,b,c,"a']])
    assert_produces(_csv(files), [("a", "b", "c", "a")])


def test_with_escaped_quotes(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithEscapedQuotes."""
    files = _setup_files(tmp_path, [['1.0,2.1,"she said: ""hello""",4.3', "5.4,6.5,goodbye,8.7"]])
    ds = _csv(files, column_types=_types(*["string"] * 4))
    assert_produces(
        ds, [("1.0", "2.1", 'she said: "hello"', "4.3"), ("5.4", "6.5", "goodbye", "8.7")]
    )


def test_with_invalid_buffer_size(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithInvalidBufferSize
    (``buffer_size`` is pyarrow's ``block_size``)."""
    files = _setup_files(tmp_path, [["a,b,c,d"]])
    with pytest.raises(dp.FileReadError, match="block_size must be at least 1"):
        dp.CsvDataset(files, read_options=pacsv.ReadOptions(block_size=0))


# _test_dataset_on_buffer_sizes: buffer sizes 1..20 and the default. pyarrow's block_size
# is the size of the chunks it parses, and a record may cross one chunk boundary, not two:
# a size is counted past the longest line (header included), so that the chunks end at
# every offset of the records (D-TF-24).
_BUFFER_SIZES = [*range(1, 21), None]
_LINEBREAKS = {"LF": "\n", "CR": "\r", "CRLF": "\r\n"}
_PLAIN = (["abc,def,ghi", "0,1,2", ",,"], [("abc", "def", "ghi"), ("0", "1", "2"), ("NA",) * 3])
_QUOTED = (
    ['"\n\n\n","\r\r\r","abc"', '"0","1","2"', '"","",""'],
    [("\n\n\n", "\r\r\r", "abc"), ("0", "1", "2"), ("NA",) * 3],
)


def _on_buffer_size(tmp_path, inputs, expected, linebreak, buffer_size, compression_type=None):
    files = _setup_files(tmp_path, [inputs], linebreak, compression_type)
    opts = None
    if buffer_size is not None:
        longest = max(len(line) for line in ["c0,c1,c2", *inputs]) + len(linebreak)
        opts = pacsv.ReadOptions(block_size=longest + buffer_size)
    ds = dp.CsvDataset(files, read_options=opts, column_types=_types(*["string"] * 3))
    assert_produces(ds.map(_filled(["NA"] * 3, str)), expected)


@pytest.mark.parametrize("buffer_size", _BUFFER_SIZES)
@pytest.mark.parametrize("linebreak", list(_LINEBREAKS))
def test_with_linebreak(tmp_path, linebreak, buffer_size):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithLF,
    CsvDatasetTest.testWithCR, CsvDatasetTest.testWithCRLF."""
    _on_buffer_size(tmp_path, *_PLAIN, _LINEBREAKS[linebreak], buffer_size)


@pytest.mark.parametrize("buffer_size", _BUFFER_SIZES)
@pytest.mark.parametrize("linebreak", list(_LINEBREAKS))
def test_with_buffer_size_and_quoted(tmp_path, linebreak, buffer_size):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithBufferSizeAndQuoted,
    CsvDatasetTest.testWithCRAndQuoted, CsvDatasetTest.testWithCRLFAndQuoted: line breaks
    inside quoted values, wherever a block ends."""
    _on_buffer_size(tmp_path, *_QUOTED, _LINEBREAKS[linebreak], buffer_size)


@pytest.mark.parametrize("buffer_size", _BUFFER_SIZES)
def test_with_gzip_compression_type(tmp_path, buffer_size):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithGzipCompressionType
    (the codec from the file name, ``.csv.gz``: D-TF-24)."""
    _on_buffer_size(tmp_path, *_QUOTED, "\r\n", buffer_size, compression_type="GZIP")


def test_with_zlib_compression_type(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWithZlibCompressionType
    (pyarrow has no ZLIB codec: the file fails to parse, loudly: D-TF-24)."""
    files = _setup_files(tmp_path, [_QUOTED[0]], "\r\n", compression_type="ZLIB")
    with pytest.raises(dp.FileReadError, match="cannot parse as CSV"):
        dp.CsvDataset(files)


def test_with_2d_defaults(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testWith2DDefaults
    (a column type that is not a scalar type is refused when built)."""
    files = _setup_files(tmp_path, [[",,,", "1,1,1,", ",2,2,2"]])
    with pytest.raises(TypeError, match=r"column_types\['c0'\] must be a pyarrow type"):
        dp.CsvDataset(files, column_types=_types([[0]], *["int64"] * 3))


def test_immutable_params(tmp_path):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetTest.testImmutableParams."""
    files = _setup_files(tmp_path, [["a,b,c", "1,2,3", "4,5,6"]], header=False)
    select_cols = ["a", "c"]
    types = {"a": "int64"}
    ds = dp.CsvDataset(files, columns=select_cols, batch_size=1, column_types=types)
    assert [sorted(b) for b in ds] == [["a", "c"], ["a", "c"]]
    assert select_cols == ["a", "c"] and types == {"a": "int64"}


@pytest.mark.parametrize("verify_fn", VERIFY_FNS)
def test_checkpoint_core(tmp_path, verify_fn):
    """experimental/kernel_tests/csv_dataset_test.py::CsvDatasetCheckpointTest.testCore
    (7 columns, 10 rows, 14 epochs; ``buffer_size=2`` counted past the longest line)."""
    num_cols, num_rows, num_epochs = 7, 10, 14
    rows = [",".join(str(num_cols * j + i) for i in range(num_cols)) for j in range(num_rows)]
    (filename,) = _setup_files(tmp_path, [rows])
    longest = max(len(line) for line in rows) + 1
    opts = pacsv.ReadOptions(block_size=longest + 2)

    def build():
        ds = dp.CsvDataset(filename, read_options=opts, column_types=_types(*["int32"] * num_cols))
        return _rows(ds).repeat(num_epochs)

    verify_checkpoint(build, num_rows * num_epochs, verify_fn)
