//===- SuperpageAdvisor.cpp - seed 004's compiler-guided superpage allocation --===//
//
// An LLVM 19 new-pass-manager plugin that implements the heuristic of seed 004
// ("compiler-based strategy for automatic and profitable memory allocation via
// superpages"): section 4 and its Figure 1 estimate the TLB demand ("spread") of
// every loop nest from the data-reuse pattern of each memory reference, compare
// the program's total spread with a TLB-derived threshold, and, when the spread
// reaches it, the program's heap is allocated from superpages by replacing
// malloc/calloc/realloc/free with smalloc/scalloc/srealloc/sfree (section 3:
// "a pass in LLVM to ... replace calls to malloc with the corresponding calls to
// smalloc").
//
// Beyond the paper: a per-allocation-site decision (-superpage-granularity=site)
// that attributes each reference's spread to the malloc call that produced its
// base pointer, a JSON report, and optimisation remarks.
//
// See llvm/README.md for the mapping of Figure 1's four cases to ScalarEvolution
// terms and for what had to be inferred.
//
//===----------------------------------------------------------------------===//

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Analysis/OptimizationRemarkEmitter.h"
#include "llvm/Analysis/ScalarEvolution.h"
#include "llvm/Analysis/ScalarEvolutionExpressions.h"
#include "llvm/Analysis/ValueTracking.h"
#include "llvm/IR/DebugInfoMetadata.h"
#include "llvm/IR/DiagnosticInfo.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/PassManager.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Passes/PassPlugin.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Transforms/Utils/LoopSimplify.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

using namespace llvm;

#define PASS_NAME "superpage-advisor"

namespace {

//===----------------------------------------------------------------------===//
// Options. clang 19 parses -mllvm before it loads -fpass-plugin plugins, so
// `-fpass-plugin=lib.so -mllvm -superpage-...` is refused as an unknown option.
// Two ways work: the environment variable SPLAB_SUPERPAGE_OPTS (same syntax,
// space separated), read once when the plugin registers its pass (after
// -mllvm, so its values win); or `-Xclang -load -Xclang lib.so` as well as
// -fpass-plugin, which loads the library (and registers these options) before
// clang parses -mllvm.
//===----------------------------------------------------------------------===//

enum class DecisionMode { Auto, Superpages, Base };
enum class GranularityMode { Program, Site };

// Section 5.1's machine (Core 2 Duo: 4-way TLB, 256 entries, 4KB pages) as the
// defaults; the threshold is derived from them, never tuned.
cl::opt<unsigned> TlbEntries("superpage-tlb-entries", cl::init(256),
                             cl::desc("superpage-advisor: entries of the base-page "
                                      "(data) TLB (seed 004 section 4)"));
cl::opt<unsigned> TlbWays("superpage-tlb-ways", cl::init(4),
                          cl::desc("superpage-advisor: associativity of that TLB"));
cl::opt<unsigned long long>
    PageSize("superpage-page-size", cl::init(4096),
             cl::desc("superpage-advisor: base page size in bytes"));
cl::opt<unsigned> DefaultTrip(
    "superpage-default-trip", cl::init(100),
    cl::desc("superpage-advisor: trip count I assumed for a loop whose trip "
             "count ScalarEvolution cannot give as a constant"));
cl::opt<DecisionMode> Decision(
    "superpage-decision", cl::init(DecisionMode::Auto),
    cl::desc("superpage-advisor: auto (Figure 1's decision) or force one"),
    cl::values(clEnumValN(DecisionMode::Auto, "auto", "use the heuristic"),
               clEnumValN(DecisionMode::Superpages, "superpages",
                          "rewrite every allocation call"),
               clEnumValN(DecisionMode::Base, "base", "rewrite nothing")));
cl::opt<GranularityMode> Granularity(
    "superpage-granularity", cl::init(GranularityMode::Program),
    cl::desc("superpage-advisor: decide for the whole program (seed 004) or per "
             "allocation site"),
    cl::values(clEnumValN(GranularityMode::Program, "program",
                          "one decision for the module (Figure 1)"),
               clEnumValN(GranularityMode::Site, "site",
                          "one decision per malloc/calloc/realloc call")));
cl::opt<std::string>
    ReportPath("superpage-report", cl::init(""),
               cl::desc("superpage-advisor: write the JSON report to this path"));

// Bad values are refused with the option's name: the pass reports an error
// through the LLVMContext (clang prints "error: superpage-advisor: ..." and the
// compilation fails) and does nothing else.
std::string optionError() {
  if (TlbWays == 0)
    return "-superpage-tlb-ways=0: the associativity must be at least 1";
  if (TlbEntries == 0)
    return "-superpage-tlb-entries=0: the TLB must have at least 1 entry";
  if (TlbEntries % TlbWays != 0)
    return ("-superpage-tlb-entries=" + Twine(TlbEntries.getValue()) +
            " is not a multiple of -superpage-tlb-ways=" + Twine(TlbWays.getValue()) +
            ": a set-associative TLB has entries = sets x ways")
        .str();
  if (PageSize == 0 || (PageSize & (PageSize - 1)) != 0)
    return ("-superpage-page-size=" + Twine(PageSize.getValue()) +
            ": the base page size must be a power of two (bytes)")
        .str();
  if (DefaultTrip == 0)
    return "-superpage-default-trip=0: the default trip count must be at least 1";
  return "";
}

// An error in SPLAB_SUPERPAGE_OPTS, found when the plugin registers (no
// LLVMContext yet), reported by the pass.
std::string EnvError;

// SPLAB_SUPERPAGE_OPTS="-superpage-granularity=site -superpage-report=x.json"
void readEnvOptions() {
  const char *Env = std::getenv("SPLAB_SUPERPAGE_OPTS");
  if (!Env || !*Env)
    return;
  SmallVector<const char *, 8> Argv;
  Argv.push_back("superpage-advisor");
  BumpPtrAllocator A;
  StringSaver Saver(A);
  cl::TokenizeGNUCommandLine(Env, Saver, Argv);
  for (size_t I = 1; I < Argv.size(); ++I) {
    StringRef Arg(Argv[I]);
    if (!Arg.starts_with("-superpage-") && !Arg.starts_with("--superpage-")) {
      EnvError = ("SPLAB_SUPERPAGE_OPTS: '" + Arg + "' is not a -superpage-* option").str();
      return;
    }
  }
  std::string Err;
  raw_string_ostream ES(Err);
  if (!cl::ParseCommandLineOptions(Argv.size(), Argv.data(), "", &ES)) {
    ES.flush();
    EnvError = ("SPLAB_SUPERPAGE_OPTS='" + Twine(Env) + "': " +
                (Err.empty() ? StringRef("rejected (see above)") : StringRef(Err).trim()))
                   .str();
  }
}

//===----------------------------------------------------------------------===//
// The analysis results.
//===----------------------------------------------------------------------===//

struct LoopTrip {
  unsigned Trip;
  bool Defaulted;
};

struct RefInfo {
  Instruction *Inst;
  std::string Class; // invariant | contiguous | noncontiguous | irregular
  LoopTrip Inner;    // I of the innermost loop holding the reference
  std::optional<uint64_t> StepBytes;
  SmallVector<LoopTrip, 2> Outer; // enclosing loops the reference varies with
  double Spread;                  // pages
  SmallVector<CallBase *, 2> Sites;
};

struct NestInfo {
  Function *F;
  DebugLoc Loc;
  BasicBlock *Header;
  double Spread = 0; // pages
  std::vector<RefInfo> Refs;
};

struct SiteInfo {
  CallBase *Call;
  std::string Callee;
  double Spread = 0;
  bool Chosen = false;
};

std::optional<unsigned> lineOf(const DebugLoc &DL) {
  if (DL && DL.getLine())
    return DL.getLine();
  return std::nullopt;
}

json::Value lineJson(const DebugLoc &DL) {
  if (auto L = lineOf(DL))
    return json::Value(static_cast<int64_t>(*L));
  return json::Value(nullptr);
}

std::string pages(double P) {
  std::string S;
  raw_string_ostream OS(S);
  OS << format("%.2f", P);
  return S;
}

bool isAllocName(StringRef N) {
  return N == "malloc" || N == "calloc" || N == "realloc";
}

Function *directCallee(const CallBase *CB) {
  return dyn_cast_or_null<Function>(CB->getCalledOperand()->stripPointerCasts());
}

//===----------------------------------------------------------------------===//
// The pass.
//===----------------------------------------------------------------------===//

class SuperpageAdvisorPass : public PassInfoMixin<SuperpageAdvisorPass> {
public:
  explicit SuperpageAdvisorPass(bool Optimizing) : Optimizing(Optimizing) {}

  PreservedAnalyses run(Module &M, ModuleAnalysisManager &MAM);
  static bool isRequired() { return true; }

private:
  bool Optimizing;

  LoopTrip tripOf(ScalarEvolution &SE, const Loop *L) const;
  bool variesWith(const SCEV *S, const Loop *L) const;
  RefInfo classify(Instruction &I, Value *Ptr, Loop *Inner, Loop *Root,
                   ScalarEvolution &SE) const;
  void resolveSites(const Value *V, SmallVectorImpl<CallBase *> &Out,
                    SmallPtrSetImpl<const Value *> &Seen, unsigned Depth) const;
};

// I: "number of current loop iteration" (Figure 1), read as the number of
// times the loop's body runs. ScalarEvolution gives the trip count when it is a
// compile-time constant; otherwise -superpage-default-trip is used and reported
// as defaulted. The pass runs before loop rotation (see the registration at the
// end), so a `for` loop still tests its condition in the header: ScalarEvolution
// counts header executions, one more than the body's (the last one exits).
// When the header is the only exiting block and not also the latch, the body's
// count is that minus one.
LoopTrip SuperpageAdvisorPass::tripOf(ScalarEvolution &SE, const Loop *L) const {
  unsigned T = SE.getSmallConstantTripCount(L);
  if (T == 0)
    return {DefaultTrip, true};
  const BasicBlock *Exiting = L->getExitingBlock();
  if (Exiting && Exiting == L->getHeader() && Exiting != L->getLoopLatch())
    T -= 1;
  return {T, false};
}

// Does the value of S change from one iteration of L to the next? True when S
// holds an add-recurrence of L with a non-zero step, or an opaque value (a load,
// a call, a phi ScalarEvolution cannot analyse) computed inside L. Unlike
// ScalarEvolution's loop disposition, an add-recurrence of a loop nested in L
// that restarts from the same value on every iteration of L does not count: it
// touches the same addresses again.
bool SuperpageAdvisorPass::variesWith(const SCEV *S, const Loop *L) const {
  return SCEVExprContains(S, [L](const SCEV *X) {
    if (auto *AR = dyn_cast<SCEVAddRecExpr>(X)) {
      if (AR->getLoop() != L)
        return false;
      for (unsigned K = 1; K < AR->getNumOperands(); ++K)
        if (!AR->getOperand(K)->isZero())
          return true;
      return false;
    }
    if (auto *U = dyn_cast<SCEVUnknown>(X))
      if (auto *I = dyn_cast<Instruction>(U->getValue()))
        return L->contains(I);
    return false;
  });
}

// Figure 1, for one memory reference r (a load or a store) of a loop nest.
//
//   "if r depends on loop induction variable then spread_r <- 1"
//     The text of section 4 says what this case is: "for a loop independent
//     dependence, a value of 1 is assigned": r touches the same address on every
//     iteration of its innermost loop, one page. In SCEV terms: the address does
//     not vary with the innermost loop (no add-recurrence of that loop with a
//     non-zero step, no opaque value computed in it). Class "invariant".
//   "else if r strides over non-contiguous dimensions then spread_r <- I"
//     Every iteration of the innermost loop lands on a new page. C's arrays are
//     linearised by the time LLVM sees them, so the dimension is decided by the
//     byte step of the address's add-recurrence in the innermost loop: a step of
//     at least one base page is non-contiguous. (With the step below a page, the
//     next case gives I*s/page < I, so the two rules meet at s = page.) Class
//     "noncontiguous". An address that varies with the innermost loop but is
//     not an affine add-recurrence of it (an index loaded from memory, a random
//     number, a step whose sign or size ScalarEvolution cannot bound) gives no
//     step to divide: it is counted here too, a new page per iteration, as class
//     "irregular". That is an inference: Figure 1 has no case for it.
//   "else if r strides over contiguous dimensions then s <- step size;
//    spread_r <- (I*s) / base page size"
//     Step s in bytes below one base page. Class "contiguous". As written: no
//     rounding up to whole pages.
//   "if r varies with the loop index then spread_r <- spread_r * I"
//     Read as: for each enclosing loop of the nest whose iterations move r (its
//     address varies with that loop's index), multiply by that loop's trip
//     count. Figure 1 shows a single multiplication (a nest of depth two); for
//     deeper nests it is applied once per enclosing loop that r varies with.
//
// I is the trip count of the loop in question (tripOf).
RefInfo SuperpageAdvisorPass::classify(Instruction &I, Value *Ptr, Loop *Inner,
                                       Loop *Root, ScalarEvolution &SE) const {
  RefInfo R;
  R.Inst = &I;
  R.Inner = tripOf(SE, Inner);
  const double Page = static_cast<double>(PageSize.getValue());
  const double Trip = R.Inner.Trip;
  const SCEV *A = SE.getSCEV(Ptr);

  if (!variesWith(A, Inner)) {
    R.Class = "invariant";
    R.Spread = 1.0;
  } else {
    std::optional<uint64_t> Step;
    if (auto *AR = dyn_cast<SCEVAddRecExpr>(A);
        AR && AR->getLoop() == Inner && AR->isAffine()) {
      const SCEV *S = AR->getOperand(1);
      if (auto *C = dyn_cast<SCEVConstant>(S)) {
        Step = C->getAPInt().abs().getLimitedValue();
      } else {
        // A step that is loop-invariant in the innermost loop but not a
        // constant (say, it grows with an outer loop): its smallest possible
        // magnitude, when ScalarEvolution can bound its sign.
        ConstantRange CR = SE.getSignedRange(S);
        if (CR.getSignedMin().isStrictlyPositive())
          Step = CR.getSignedMin().getLimitedValue();
        else if (CR.getSignedMax().isNegative())
          Step = CR.getSignedMax().abs().getLimitedValue();
      }
    }
    R.StepBytes = Step;
    if (!Step) {
      R.Class = "irregular";
      R.Spread = Trip;
    } else if (*Step >= PageSize) {
      R.Class = "noncontiguous";
      R.Spread = Trip;
    } else {
      R.Class = "contiguous";
      R.Spread = Trip * static_cast<double>(*Step) / Page;
    }
  }

  for (Loop *P = Inner->getParentLoop(); P; P = P->getParentLoop()) {
    if (variesWith(A, P)) {
      LoopTrip T = tripOf(SE, P);
      R.Outer.push_back(T);
      R.Spread *= T.Trip;
    }
    if (P == Root)
      break;
  }
  return R;
}

// Beyond the paper: the allocation calls a pointer comes from. Looks through
// GEPs, casts, phis and selects (getUnderlyingObjects), through a load of a
// global variable or a stack slot to the values stored there, and through a
// function argument to the values passed at the module's direct call sites.
void SuperpageAdvisorPass::resolveSites(const Value *V,
                                        SmallVectorImpl<CallBase *> &Out,
                                        SmallPtrSetImpl<const Value *> &Seen,
                                        unsigned Depth) const {
  if (Depth > 8 || !Seen.insert(V).second)
    return;
  SmallVector<const Value *, 4> Objs;
  getUnderlyingObjects(V, Objs);
  for (const Value *O : Objs) {
    if (auto *CB = dyn_cast<CallBase>(O)) {
      if (Function *F = directCallee(CB); F && isAllocName(F->getName()))
        if (!is_contained(Out, CB))
          Out.push_back(const_cast<CallBase *>(CB));
      continue;
    }
    if (auto *Arg = dyn_cast<Argument>(O)) {
      const Function *F = Arg->getParent();
      for (const User *U : F->users())
        if (auto *CB = dyn_cast<CallBase>(U))
          if (CB->getCalledOperand() == F && Arg->getArgNo() < CB->arg_size())
            resolveSites(CB->getArgOperand(Arg->getArgNo()), Out, Seen, Depth + 1);
      continue;
    }
    if (auto *Ld = dyn_cast<LoadInst>(O)) {
      const Value *Slot = getUnderlyingObject(Ld->getPointerOperand());
      if (isa<GlobalVariable>(Slot) || isa<AllocaInst>(Slot))
        for (const User *U : Slot->users())
          if (auto *SI = dyn_cast<StoreInst>(U))
            if (SI->getPointerOperand() == Slot)
              resolveSites(SI->getValueOperand(), Out, Seen, Depth + 1);
      continue;
    }
  }
}

PreservedAnalyses SuperpageAdvisorPass::run(Module &M, ModuleAnalysisManager &MAM) {
  std::string Bad = EnvError.empty() ? optionError() : EnvError;
  if (!Bad.empty()) {
    M.getContext().emitError(PASS_NAME ": " + Bad);
    return PreservedAnalyses::all();
  }
  auto &FAM = MAM.getResult<FunctionAnalysisManagerModuleProxy>(M).getManager();

  // Section 4: threshold = (no of entries / associativity + 1) x base page size.
  // That is bytes; Figure 1's spread is in pages (I, or I*s / base page size),
  // so the comparison "spread_all >= threshold" is made in pages:
  // spread_all >= entries/ways + 1, the same as spread_all x page >= threshold.
  const uint64_t ThresholdPages = TlbEntries / TlbWays + 1;
  const uint64_t ThresholdBytes = ThresholdPages * PageSize;

  // "Program" (Figure 1's decision is per program) is this module: for a
  // program in one C file the module is the whole program; for a program of
  // several files each file decides alone unless they are linked into one
  // module first (-flto).
  std::vector<NestInfo> Nests;
  std::vector<SiteInfo> Sites;
  DenseMap<CallBase *, unsigned> SiteIndex;

  for (Function &F : M) {
    if (F.isDeclaration())
      continue;
    for (Instruction &I : instructions(F))
      if (auto *CB = dyn_cast<CallBase>(&I))
        if (Function *Callee = directCallee(CB); Callee && isAllocName(Callee->getName())) {
          SiteIndex[CB] = Sites.size();
          Sites.push_back({CB, Callee->getName().str()});
        }
  }

  // At -O0 clang marks every function optnone and nothing has promoted the
  // loop variables out of memory, so ScalarEvolution sees no induction
  // variables: the advisor needs -O1 or higher and says so.
  const bool Analyse = Optimizing;
  if (!Analyse)
    errs() << "warning: " PASS_NAME ": needs -O1 or higher (at -O0 loop "
              "induction variables live in memory); no loop nest analysed\n";

  // "for all loop-nests s in procedure do / for all memory references r in s"
  for (Function &F : M) {
    if (!Analyse || F.isDeclaration() || F.hasOptNone())
      continue;
    auto &LI = FAM.getResult<LoopAnalysis>(F);
    auto &SE = FAM.getResult<ScalarEvolutionAnalysis>(F);
    for (Loop *Root : reverse(LI)) { // top-level loops, in source order: one nest each
      NestInfo N{&F, Root->getStartLoc(), Root->getHeader()};
      for (BasicBlock *BB : Root->blocks()) {
        Loop *Inner = LI.getLoopFor(BB);
        for (Instruction &I : *BB) {
          Value *Ptr = nullptr;
          if (auto *Ld = dyn_cast<LoadInst>(&I))
            Ptr = Ld->getPointerOperand();
          else if (auto *St = dyn_cast<StoreInst>(&I))
            Ptr = St->getPointerOperand();
          if (!Ptr)
            continue;
          RefInfo R = classify(I, Ptr, Inner, Root, SE);
          SmallPtrSet<const Value *, 8> Seen;
          resolveSites(Ptr, R.Sites, Seen, 0);
          N.Spread += R.Spread;
          N.Refs.push_back(std::move(R));
        }
      }
      Nests.push_back(std::move(N));
    }
  }

  // "spread_all <- sum of spread_r; if spread_all >= threshold then use
  // superpages else use standard pages"
  double Total = 0;
  for (const NestInfo &N : Nests)
    Total += N.Spread;
  const bool Heuristic = Analyse && Total >= static_cast<double>(ThresholdPages);
  const bool Forced = Decision != DecisionMode::Auto;
  const bool UseSuper = Forced ? Decision == DecisionMode::Superpages : Heuristic;

  for (const NestInfo &N : Nests)
    for (const RefInfo &R : N.Refs)
      for (CallBase *CB : R.Sites)
        if (auto It = SiteIndex.find(CB); It != SiteIndex.end())
          Sites[It->second].Spread += R.Spread;

  // Per site (beyond the paper). Only when the program as a whole reaches the
  // threshold: take the sites with the largest spread, one at a time, until the
  // spread left on base pages (references of sites not taken, and references
  // with no known site) is below the threshold, i.e. fits the TLB by section
  // 4's estimate. A reference whose base may come from several sites counts
  // for each of them, and stays on base pages until all of them are taken.
  if (Granularity == GranularityMode::Site) {
    if (Forced) {
      for (SiteInfo &S : Sites)
        S.Chosen = UseSuper;
    } else if (Heuristic) {
      while (true) {
        double Left = 0;
        for (const NestInfo &N : Nests)
          for (const RefInfo &R : N.Refs) {
            bool Moved = !R.Sites.empty() && all_of(R.Sites, [&](CallBase *CB) {
              auto It = SiteIndex.find(CB);
              return It != SiteIndex.end() && Sites[It->second].Chosen;
            });
            if (!Moved)
              Left += R.Spread;
          }
        if (Left < static_cast<double>(ThresholdPages))
          break;
        SiteInfo *Best = nullptr;
        for (SiteInfo &S : Sites)
          if (!S.Chosen && S.Spread > 0 && (!Best || S.Spread > Best->Spread))
            Best = &S;
        if (!Best)
          break;
        Best->Chosen = true;
      }
    }
  } else {
    for (SiteInfo &S : Sites)
      S.Chosen = UseSuper;
  }

  // Remarks: per nest (analysis), per site, the decision, and each rewrite.
  auto OREFor = [&](Function *F) -> OptimizationRemarkEmitter & {
    return FAM.getResult<OptimizationRemarkEmitterAnalysis>(*F);
  };
  for (const NestInfo &N : Nests) {
    auto &ORE = OREFor(N.F);
    ORE.emit([&] {
      OptimizationRemarkAnalysis R(PASS_NAME, "NestSpread", N.Loc, N.Header);
      R << "loop nest spread " << pages(N.Spread) << " pages over "
        << ore::NV("References", static_cast<unsigned>(N.Refs.size()))
        << " references; threshold " << ore::NV("ThresholdPages", ThresholdPages)
        << " pages (" << ore::NV("ThresholdBytes", ThresholdBytes) << " bytes)";
      return R;
    });
    for (const RefInfo &Ref : N.Refs)
      ORE.emit([&] {
        OptimizationRemarkAnalysis R(PASS_NAME, "RefSpread", Ref.Inst);
        R << (isa<LoadInst>(Ref.Inst) ? "load" : "store") << " " << Ref.Class
          << ": I=" << ore::NV("Trip", Ref.Inner.Trip)
          << (Ref.Inner.Defaulted ? " (defaulted)" : "");
        if (Ref.StepBytes)
          R << " step " << ore::NV("StepBytes", *Ref.StepBytes) << " bytes";
        for (const LoopTrip &T : Ref.Outer)
          R << " x" << ore::NV("OuterTrip", T.Trip)
            << (T.Defaulted ? " (defaulted)" : "");
        R << ": spread " << pages(Ref.Spread) << " pages";
        return R;
      });
  }

  Function *Anchor = M.getFunction("main");
  if (!Anchor || Anchor->isDeclaration()) {
    Anchor = nullptr;
    for (Function &F : M)
      if (!F.isDeclaration()) {
        Anchor = &F;
        break;
      }
  }
  if (Anchor) {
    auto &ORE = OREFor(Anchor);
    ORE.emit([&] {
      DebugLoc DL;
      if (DISubprogram *SP = Anchor->getSubprogram())
        DL = DILocation::get(M.getContext(), SP->getLine(), 0, SP);
      OptimizationRemarkAnalysis R(PASS_NAME, "Decision", DL, &Anchor->getEntryBlock());
      R << "program spread " << pages(Total) << " pages, threshold "
        << ore::NV("ThresholdPages", ThresholdPages) << " pages: "
        << (Heuristic ? "use superpages" : "use standard pages");
      if (Forced)
        R << "; forced: " << (UseSuper ? "superpages" : "base pages");
      return R;
    });
  }
  for (const SiteInfo &S : Sites)
    OREFor(S.Call->getFunction()).emit([&] {
      OptimizationRemarkAnalysis R(PASS_NAME, "Site", S.Call);
      R << "allocation site " << S.Callee << ": spread " << pages(S.Spread)
        << " pages: " << (S.Chosen ? "superpages" : "base pages");
      return R;
    });

  // Rewriting (section 3). Program mode: every allocation call and every free
  // when the decision is superpages; nothing otherwise. Site mode: the chosen sites' calls, and,
  // if any site was chosen, every free and realloc (sfree and srealloc accept
  // pointers from libc too).
  bool AnyChosen = any_of(Sites, [](const SiteInfo &S) { return S.Chosen; });
  SmallVector<std::pair<CallBase *, StringRef>, 16> ToRewrite;
  for (Function &F : M) {
    if (F.isDeclaration())
      continue;
    for (Instruction &I : instructions(F)) {
      auto *CB = dyn_cast<CallBase>(&I);
      if (!CB)
        continue;
      Function *Callee = directCallee(CB);
      if (!Callee)
        continue;
      StringRef Name = Callee->getName();
      StringRef New = StringSwitch<StringRef>(Name)
                          .Case("malloc", "smalloc")
                          .Case("calloc", "scalloc")
                          .Case("realloc", "srealloc")
                          .Case("free", "sfree")
                          .Default("");
      if (New.empty())
        continue;
      bool Do;
      if (auto It = SiteIndex.find(CB); It != SiteIndex.end())
        Do = Sites[It->second].Chosen ||
             (Granularity == GranularityMode::Site && Name == "realloc" && AnyChosen);
      else // free: in program mode whenever the decision is superpages (a
           // pointer from another module may be smalloc's; sfree takes both)
        Do = Granularity == GranularityMode::Site ? AnyChosen : UseSuper;
      if (Do)
        ToRewrite.push_back({CB, New});
    }
  }
  for (auto &Item : ToRewrite) {
    CallBase *CB = Item.first;
    StringRef New = Item.second;
    StringRef Old = directCallee(CB)->getName();
    OREFor(CB->getFunction()).emit([&] {
      OptimizationRemark R(PASS_NAME, "Rewrite", CB);
      R << Old << " replaced by " << New;
      return R;
    });
    // Same signature as the libc function; the call site's attributes are
    // dropped so that nothing libc-specific (allocator kind, allocsize) is
    // claimed for the superpage allocator.
    FunctionCallee FC = M.getOrInsertFunction(New, CB->getFunctionType());
    CB->setCalledFunction(FC);
    CB->setAttributes(AttributeList());
  }

  if (!ReportPath.empty()) {
    std::error_code EC;
    raw_fd_ostream OS(ReportPath, EC, sys::fs::OF_Text);
    if (EC) {
      M.getContext().emitError(PASS_NAME ": -superpage-report=" + ReportPath +
                               ": " + EC.message());
      return PreservedAnalyses::none();
    }
    json::OStream J(OS, 2);
    J.object([&] {
      J.attribute("module", M.getSourceFileName());
      J.attribute("pass", PASS_NAME);
      J.attribute("analysed", Analyse);
      J.attributeObject("tlb", [&] {
        J.attribute("entries", static_cast<int64_t>(TlbEntries));
        J.attribute("ways", static_cast<int64_t>(TlbWays));
        J.attribute("page_size", static_cast<int64_t>(PageSize));
      });
      J.attribute("threshold_pages", static_cast<int64_t>(ThresholdPages));
      J.attribute("threshold_bytes", static_cast<int64_t>(ThresholdBytes));
      J.attribute("default_trip", static_cast<int64_t>(DefaultTrip));
      J.attributeArray("nests", [&] {
        for (const NestInfo &N : Nests)
          J.object([&] {
            J.attribute("function", N.F->getName());
            J.attribute("line", lineJson(N.Loc));
            J.attribute("spread_pages", N.Spread);
            J.attributeArray("refs", [&] {
              for (const RefInfo &R : N.Refs)
                J.object([&] {
                  bool AnyDefault = R.Inner.Defaulted ||
                                    any_of(R.Outer, [](const LoopTrip &T) { return T.Defaulted; });
                  J.attribute("line", lineJson(R.Inst->getDebugLoc()));
                  J.attribute("kind", isa<LoadInst>(R.Inst) ? "load" : "store");
                  J.attribute("class", R.Class);
                  J.attribute("trip", static_cast<int64_t>(R.Inner.Trip));
                  J.attribute("defaulted_trip", AnyDefault);
                  if (R.StepBytes)
                    J.attribute("step_bytes", static_cast<int64_t>(*R.StepBytes));
                  else
                    J.attribute("step_bytes", nullptr);
                  J.attributeArray("outer_trips", [&] {
                    for (const LoopTrip &T : R.Outer)
                      J.object([&] {
                        J.attribute("trip", static_cast<int64_t>(T.Trip));
                        J.attribute("defaulted_trip", T.Defaulted);
                      });
                  });
                  J.attribute("spread_pages", R.Spread);
                  J.attributeArray("sites", [&] {
                    for (CallBase *CB : R.Sites)
                      if (auto It = SiteIndex.find(CB); It != SiteIndex.end())
                        J.value(static_cast<int64_t>(It->second));
                  });
                });
            });
          });
      });
      J.attribute("spread_pages_total", Total);
      J.attribute("heuristic_decision", Heuristic ? "superpages" : "base");
      J.attribute("forced", Forced);
      J.attribute("decision", UseSuper ? "superpages" : "base");
      J.attribute("granularity",
                  Granularity == GranularityMode::Site ? "site" : "program");
      J.attributeArray("sites", [&] {
        for (size_t K = 0; K < Sites.size(); ++K)
          J.object([&] {
            const SiteInfo &S = Sites[K];
            J.attribute("index", static_cast<int64_t>(K));
            J.attribute("function", S.Call->getFunction()->getName());
            J.attribute("line", lineJson(S.Call->getDebugLoc()));
            J.attribute("callee", S.Callee);
            J.attribute("spread_pages", S.Spread);
            J.attribute("decision", S.Chosen ? "superpages" : "base");
          });
      });
      J.attribute("rewritten", static_cast<int64_t>(ToRewrite.size()));
    });
    OS << "\n";
  }

  return ToRewrite.empty() ? PreservedAnalyses::all() : PreservedAnalyses::none();
}

} // namespace

// Where it runs: one module pass at PipelineEarlySimplificationEP, after the
// module's first function cleanup (SROA has promoted local variables to SSA
// registers, so ScalarEvolution sees induction variables and trip counts) and
// before the inliner's function simplification pipeline, which fully unrolls
// loops with small constant trip counts (loop-unroll-full) and turns loops into
// memset/memcpy (loop-idiom); and long before the vectoriser and the runtime
// unroller. Each of those rewrites the references Figure 1 counts: a fully
// unrolled inner loop of transpose turns one reference with I = N into N
// references that no longer vary with that loop, so an earlier version of this
// plugin at OptimizerEarlyEP (after them) gave spreads that depended on the
// unroller's size limits for small N. Here the nests are the procedures' loop
// nests as written, per procedure, as in Figure 1 ("for all loop-nests s in
// procedure"), before inlining. LoopSimplify first gives every loop a preheader
// and a single latch (canonical form for ScalarEvolution; the later loop passes
// require it anyway). Being a module pass it sees the whole program (Figure 1
// decides per program) and rewrites calls in every function after analysing all
// of them, so the rewritten calls are the ones that were analysed; LLVM's
// malloc-specific folds later (deleting an unused malloc, malloc+memset ->
// calloc) no longer apply to the rewritten calls. The same callback fires at
// -O1, -O2 and -O3; at -O0 see the warning in run().
extern "C" LLVM_ATTRIBUTE_WEAK PassPluginLibraryInfo llvmGetPassPluginInfo() {
  return {LLVM_PLUGIN_API_VERSION, "SuperpageAdvisor", "1", [](PassBuilder &PB) {
            static bool EnvRead = false;
            if (!EnvRead) {
              EnvRead = true;
              readEnvOptions();
            }
            PB.registerPipelineEarlySimplificationEPCallback(
                [](ModulePassManager &MPM, OptimizationLevel Level) {
                  bool Optimizing = Level != OptimizationLevel::O0;
                  if (Optimizing)
                    MPM.addPass(createModuleToFunctionPassAdaptor(LoopSimplifyPass()));
                  MPM.addPass(SuperpageAdvisorPass(Optimizing));
                });
            // For `opt -load-pass-plugin=... -passes=superpage-advisor`.
            PB.registerPipelineParsingCallback(
                [](StringRef Name, ModulePassManager &MPM,
                   ArrayRef<PassBuilder::PipelineElement>) {
                  if (Name != PASS_NAME)
                    return false;
                  MPM.addPass(SuperpageAdvisorPass(true));
                  return true;
                });
          }};
}
