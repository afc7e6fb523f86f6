# ManPage.cmake - renders zkelect.1 (cmake -P, run by the build):
#   cmake "-DSOURCES=docs/operations.md;docs/policy.md" -DHEAD=docs/zkelect.1.head.md
#         [-DTAIL=docs/zkelect.1.tail.md] -DLOWDOWN=lowdown -DVERSION=x.y.z
#         -DOUT=zkelect.1 [-DMD=work.md] [-DEXPECT=docs/zkelect.1] -P ManPage.cmake
# MD is where the assembled Markdown goes (default OUT.md). With EXPECT, the
# run fails when the page rendered into OUT differs from the file EXPECT:
# the test docs.manpage checks so that the prebuilt page docs/zkelect.1 (what
# a build without lowdown installs) is what the current docs render to. The
# page has no date and no path of the machine: the same docs and version
# render to the same bytes.
# The page is HEAD (metadata, NAME, SYNOPSIS, DESCRIPTION) followed by every
# part of each of SOURCES, in order, between "<!-- man:begin -->" and
# "<!-- man:end -->", one heading level up ("## X" becomes a section, in
# capitals), then TAIL (SEE ALSO). Those documents are the one source:
# docs/operations.md (the CLI reference) and docs/policy.md (the policy
# script). The page is read where the package is installed, which has no
# source tree: a link to an anchor or to one of SOURCES is reduced to its
# text, a link to another document of docs/ gets the document's installed
# path, and a path of the tree that is installed (examples/, contrib/,
# docs/, the units) becomes its path in the Debian package
# (/usr/share/doc/zkelect/...; the FILES section says where another prefix
# puts them). tests/man_check.py fails on any other path of the tree.
cmake_minimum_required(VERSION 3.18)
foreach(v SOURCES HEAD LOWDOWN VERSION OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "ManPage.cmake: -D${v}=... missing")
  endif()
endforeach()

file(READ "${HEAD}" md)
string(REPLACE "@VERSION@" "${VERSION}" md "${md}")

foreach(source IN LISTS SOURCES)
  file(READ "${source}" doc)
  set(parts 0)
  while(TRUE)
    string(FIND "${doc}" "<!-- man:begin -->" b)
    if(b EQUAL -1)
      break()
    endif()
    math(EXPR b "${b} + 18")
    string(SUBSTRING "${doc}" ${b} -1 doc)
    string(FIND "${doc}" "<!-- man:end -->" e)
    if(e EQUAL -1)
      message(FATAL_ERROR "${source}: <!-- man:begin --> without <!-- man:end -->")
    endif()
    string(SUBSTRING "${doc}" 0 ${e} part)
    string(APPEND md "\n${part}\n")
    math(EXPR parts "${parts} + 1")
  endwhile()
  if(parts EQUAL 0)
    message(FATAL_ERROR "${source}: no <!-- man:begin --> ... <!-- man:end --> part")
  endif()
endforeach()
if(DEFINED TAIL)
  file(READ "${TAIL}" tail)
  string(APPEND md "\n${tail}")
endif()

# "## Title" -> "# TITLE", "### Sub" -> "## Sub" (section, subsection)
set(out "")
while(TRUE)
  string(REGEX MATCH "\n## [^\n]*" h "${md}")
  if(h STREQUAL "")
    break()
  endif()
  string(FIND "${md}" "${h}" at)
  string(SUBSTRING "${md}" 0 ${at} before)
  string(LENGTH "${h}" hl)
  math(EXPR after_at "${at} + ${hl}")
  string(SUBSTRING "${md}" ${after_at} -1 md)
  string(SUBSTRING "${h}" 4 -1 title)
  string(TOUPPER "${title}" title)
  string(APPEND out "${before}\n# ${title}")
endwhile()
string(APPEND out "${md}")
string(REPLACE "\n### " "\n## " out "${out}")
# The installed documents: where a link or a path of the tree points.
set(_doc /usr/share/doc/zkelect)
set(_sources_names "")
foreach(source IN LISTS SOURCES)
  get_filename_component(n "${source}" NAME)
  list(APPEND _sources_names "${n}")
endforeach()
# [text](other.md#anchor) -> text (in /usr/share/doc/zkelect/other.md), for
# a document of docs/ that is not part of this page
string(REGEX MATCHALL "\\]\\(([A-Za-z0-9_-]+\\.md)(#[^)]*)?\\)" _links "${out}")
list(REMOVE_DUPLICATES _links)
foreach(l IN LISTS _links)
  string(REGEX REPLACE "^\\]\\(([A-Za-z0-9_-]+\\.md).*" "\\1" n "${l}")
  list(FIND _sources_names "${n}" i)
  if(i EQUAL -1)
    string(REGEX REPLACE "\\[([^]]*)\\]\\(${n}(#[^)]*)?\\)" "\\1 (${_doc}/${n})" out "${out}")
  endif()
endforeach()
# [text](#anchor), [text](path/in/repo) -> text: links inside a document or
# the repository mean nothing in man (URLs, with a colon, stay); the first
# pattern takes an image's "!" along
string(REGEX REPLACE "\\[([^]]*)\\]\\([^):]*\\)" "\\1" out "${out}")
# paths of the tree that the packages install -> their installed paths
string(REGEX REPLACE "([^A-Za-z0-9_/.-])examples/zkelect(@?)\\.service\\.in" "\\1/lib/systemd/system/zkelect\\2.service" out "${out}")
string(REGEX REPLACE "([^A-Za-z0-9_/.-])examples/" "\\1${_doc}/examples/" out "${out}")
string(REGEX REPLACE "([^A-Za-z0-9_/.-])contrib/" "\\1/usr/share/zkelect/" out "${out}")
string(REGEX REPLACE "([^A-Za-z0-9_/.-])docs/([A-Za-z0-9_-]+\\.md)" "\\1${_doc}/\\2" out "${out}")

if(DEFINED MD)
  set(src "${MD}")
else()
  set(src "${OUT}.md")
endif()
file(WRITE "${src}" "${out}")
# no smart typography: "--zk" must stay two hyphens, not an en dash
find_program(_lowdown NAMES "${LOWDOWN}" NO_CACHE)
if(NOT _lowdown)
  message(FATAL_ERROR "lowdown not found (${LOWDOWN}): the man page is rendered with it "
                      "(Debian: apt-get install lowdown; scripts/setup.sh --dev installs it)")
endif()
execute_process(COMMAND "${_lowdown}" -s -Tman --out-no-smarty "${src}"
                OUTPUT_VARIABLE roff RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "lowdown failed (${rc}) on ${src}: ${err}")
endif()
# Tables: lowdown gives every column the same width ("expand"); let the
# short columns keep their natural width and the last one take the rest.
string(REPLACE "tab(|) expand allbox;" "tab(|) allbox;" roff "${roff}")
string(REGEX REPLACE "\n(l( l)*) l\\.\n" "\n\\1 lx.\n" roff "${roff}")
# tables are tbl(1) input: the first line tells man(1) to run tbl
file(WRITE "${OUT}" "'\\\" t\n${roff}")

if(DEFINED EXPECT)
  file(READ "${EXPECT}" expected)
  file(READ "${OUT}" rendered)
  if(NOT expected STREQUAL rendered)
    message(FATAL_ERROR "${EXPECT} is not what lowdown renders from the current docs "
                        "(${OUT} is): refresh it with `cmake --build build --target manpage-update` "
                        "and commit it (diff -u ${EXPECT} ${OUT} shows what changed)")
  endif()
endif()
